import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { QUEUES } from '../src/db/queues.ts'
import type { Logger } from '../src/logging/logger.ts'
import { adoptUnqueuedDeliveriesTx, fanOutEventsTx, type QueuedDelivery } from '../src/platform/webhook-deliveries-sql.ts'
import type { WebhookJobData } from './webhook-deliver.ts'

export type WebhookFanOutDeps = { db: Knex; boss: PgBoss; clock: () => Date; logger: Logger }

/** Events (and unowned deliveries) per fan-out transaction: short transactions, any backlog in several. */
export const FAN_OUT_BATCH = 200

export type FanOutCounts = { events: number; queued: number; adopted: number }

/** The jobs of deliveries that got one, in the endpoint's group, due when the delivery is. */
async function sendJobsTx(trx: Knex.Transaction, boss: PgBoss, deliveries: readonly QueuedDelivery[]): Promise<void> {
  if (deliveries.length === 0) return
  const jobs = deliveries.map((delivery) => {
    const data: WebhookJobData = { deliveryId: delivery.id }
    return { id: delivery.job_id, data, startAfter: delivery.next_attempt_at, group: { id: delivery.endpoint_id } }
  })
  await boss.insert(QUEUES.webhookDelivery, jobs, { db: fromKnex(trx) })
}

/**
 * The fan-out (docs/events.md "Delivery"): until nothing is left, one transaction at a time writes
 * new events' delivery rows and their `webhook-delivery` jobs together, then gives a job to every
 * pending delivery that has none (redriven, or written before deliveries were jobs). The triggers
 * noted each event's endpoints in the fact's transaction, so nothing here decides who hears what.
 */
export async function fanOutWebhooksOnce(deps: WebhookFanOutDeps): Promise<FanOutCounts> {
  const counts: FanOutCounts = { events: 0, queued: 0, adopted: 0 }
  for (;;) {
    const batch = await deps.db.transaction(async (trx) => {
      const now = deps.clock()
      const fanned = await fanOutEventsTx(trx, now, FAN_OUT_BATCH)
      const adopted = await adoptUnqueuedDeliveriesTx(trx, now, FAN_OUT_BATCH)
      await sendJobsTx(trx, deps.boss, [...fanned.queued, ...adopted])
      return { events: fanned.events, queued: fanned.queued.length, adopted: adopted.length }
    })
    counts.events += batch.events
    counts.queued += batch.queued
    counts.adopted += batch.adopted
    if (batch.events < FAN_OUT_BATCH && batch.adopted < FAN_OUT_BATCH) break
  }
  if (counts.events > 0 || counts.adopted > 0) deps.logger.debug('webhook fan-out', counts)
  return counts
}

/** The `webhook-fan-out` handler: every job runs one full fan-out, whatever woke it. */
export function createWebhookFanOutHandler(deps: WebhookFanOutDeps) {
  return async (): Promise<void> => {
    await fanOutWebhooksOnce(deps)
  }
}
