import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { fromKnex, type Job, type PgBoss } from 'pg-boss'
import { EnvelopeError, open } from '../src/crypto/envelope.ts'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import { signWebhook } from '../src/crypto/webhook-signature.ts'
import { QUEUES } from '../src/db/queues.ts'
import { parseRetryAfter } from '../src/delivery/retry-after.ts'
import type { WebhookPost } from '../src/delivery/webhook-sender.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import { completeJobTx, LeaseLostError } from '../src/outbox/settle.ts'
import { WEBHOOK_FAILURES } from '../src/platform/event-types.ts'
import { checkWebhookUrlShape, WebhookUrlRefusedError, type AddressPolicy } from '../src/platform/webhook-address-guard.ts'
import { claimDelivery, recordDeliveryTx, type ClaimedDelivery, type DeliveryRecord } from '../src/platform/webhook-deliveries-sql.ts'
import { secretContext } from '../src/platform/webhook-endpoints.ts'
import { decideWebhook, type WebhookOutcome, type WebhookRetrySettings } from '../src/platform/webhook-retry.ts'

/** A `webhook-delivery` job's data: the delivery row's id, nothing else (its event may name a person). */
export type WebhookJobData = { deliveryId: string }

export type WebhookDeliverDeps = {
  db: Knex
  boss: PgBoss
  outboxKey: KeyRing
  /** The POST, through agents whose connections resolve with the SSRF guard (src/delivery/webhook-sender.ts). */
  post: WebhookPost
  addresses: Pick<AddressPolicy, 'production' | 'allowedHosts'>
  settings: WebhookRetrySettings
  clock: () => Date
  logger: Logger
}

/** What one job came to: `stale` when it owned nothing to send, `lease_lost` when its record was refused. */
export type WebhookJobOutcome = 'delivered' | 'retried' | 'dead_lettered' | 'stale' | 'lease_lost'

/** The signing secrets in force: the current one, and the rotated-out one during its overlap. */
function secretsOf(delivery: ClaimedDelivery, outboxKey: KeyRing, now: Date): string[] {
  const context = secretContext(delivery.endpoint_id, delivery.url)
  const secrets = [open(outboxKey, delivery.secret_envelope, context).toString('utf8')]
  if (delivery.previous_secret_envelope && delivery.previous_secret_until && delivery.previous_secret_until > now)
    secrets.push(open(outboxKey, delivery.previous_secret_envelope, context).toString('utf8'))
  return secrets
}

/** Sends one claimed delivery (no transaction open) and says what its attempt came to. */
async function attempt(deps: WebhookDeliverDeps, delivery: ClaimedDelivery): Promise<DeliveryRecord> {
  const now = deps.clock()
  let url: URL
  let secrets: string[]
  try {
    url = checkWebhookUrlShape(delivery.url, deps.addresses).url
    secrets = secretsOf(delivery, deps.outboxKey, now)
  } catch (error) {
    if (error instanceof EnvelopeError) {
      deps.logger.error('webhook signing secret cannot be opened; delivery dead-lettered', {
        endpointId: delivery.endpoint_id,
        ...describeError(error),
      })
      return { state: 'dead_lettered', status: null, failure: WEBHOOK_FAILURES.secretUnreadable }
    }
    if (error instanceof WebhookUrlRefusedError) return { state: 'dead_lettered', status: null, failure: WEBHOOK_FAILURES.addressRefused }
    throw error
  }
  const body = JSON.stringify({ type: delivery.type, timestamp: delivery.occurred_at.toISOString(), data: delivery.payload })
  const timestamp = Math.floor(now.getTime() / 1000)
  const answer = await deps.post({
    url,
    body,
    headers: {
      'webhook-id': delivery.event_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(secrets, delivery.event_id, timestamp, body),
      'user-agent': 'Sealpost-Webhooks/1',
    },
  })
  const answeredAt = deps.clock()
  const outcome: WebhookOutcome =
    answer.kind === 'answered'
      ? { kind: 'answered', status: answer.status, retryAfterAt: parseRetryAfter(answer.retryAfter, answeredAt) }
      : answer.kind === 'unsent'
        ? { kind: 'unsent' }
        : answer
  const decision = decideWebhook(deps.settings, delivery.attempt_count, outcome, answeredAt)
  if (decision.kind === 'delivered') return { state: 'delivered', status: decision.status }
  if (decision.kind === 'retry')
    return { state: 'pending', nextAttemptAt: decision.at, nextJobId: randomUUID(), status: decision.status, failure: decision.failure }
  return { state: 'dead_lettered', status: decision.status, failure: decision.failure }
}

/**
 * Records the attempt and settles the job in one short transaction: the delivery's row, the job of
 * its next attempt (`startAfter` from the retry policy, in the endpoint's group) and the job's
 * completion under the attempt it was fetched at. If pg-boss gave that attempt to another worker
 * meanwhile, nothing is recorded (`lease_lost`); if the row changed (disabled, deleted) the job just ends.
 */
async function recordAttempt(
  deps: WebhookDeliverDeps,
  job: Job<WebhookJobData>,
  delivery: ClaimedDelivery,
  record: DeliveryRecord,
): Promise<boolean> {
  return await deps.db.transaction(async (trx) => {
    const recorded = await recordDeliveryTx(trx, delivery, record, deps.clock())
    if (recorded && record.state === 'pending') {
      const data: WebhookJobData = { deliveryId: delivery.id }
      await deps.boss.send(QUEUES.webhookDelivery, data, {
        db: fromKnex(trx),
        id: record.nextJobId,
        startAfter: record.nextAttemptAt,
        group: { id: delivery.endpoint_id },
      })
    }
    await completeJobTx(trx, deps.boss, { jobId: job.id, retryCount: job.retryCount }, QUEUES.webhookDelivery)
    return recorded
  })
}

/**
 * One `webhook-delivery` job (docs/events.md "Delivery"): claim its delivery (the attempt counted),
 * post it with no transaction open, record the outcome and settle the job. A job whose delivery
 * is gone, finished or owned by a newer job ends without a send. An error escaping here fails
 * the job back to pg-boss: its retry sends again with the same `webhook-id`, a duplicate only
 * where the outcome was never recorded.
 */
export async function deliverWebhookJob(deps: WebhookDeliverDeps, job: Job<WebhookJobData>): Promise<WebhookJobOutcome> {
  const deliveryId = typeof job.data?.deliveryId === 'string' && /^\d{1,18}$/.test(job.data.deliveryId) ? job.data.deliveryId : undefined
  const delivery = deliveryId ? await claimDelivery(deps.db, deliveryId, job.id) : undefined
  if (!delivery) {
    await deps.boss.complete(QUEUES.webhookDelivery, { id: job.id, retryCount: job.retryCount })
    return 'stale'
  }
  const record = await attempt(deps, delivery)
  let recorded: boolean
  try {
    recorded = await recordAttempt(deps, job, delivery, record)
  } catch (error) {
    if (!(error instanceof LeaseLostError)) throw error
    deps.logger.warn('webhook delivery lease lost; its newer attempt records it', { endpointId: delivery.endpoint_id, jobId: job.id })
    return 'lease_lost'
  }
  if (!recorded) return 'stale'
  if (record.state === 'dead_lettered')
    deps.logger.warn('webhook delivery dead-lettered', {
      endpointId: delivery.endpoint_id,
      webhookId: delivery.event_id,
      failure: record.failure,
      status: record.status,
    })
  return record.state === 'pending' ? 'retried' : record.state
}

/** The `webhook-delivery` handler `boss.work` runs, one job per call (a slow endpoint holds only its own slots). */
export function createWebhookDeliveryHandler(deps: WebhookDeliverDeps) {
  return async (jobs: Job<WebhookJobData>[]): Promise<void> => {
    for (const job of jobs) await deliverWebhookJob(deps, job)
  }
}
