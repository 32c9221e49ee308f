import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import { QUEUES } from '../src/db/queues.ts'
import type { Logger } from '../src/logging/logger.ts'
import { crashLoopSourceTx } from '../src/outbox/pgboss-jobs-sql.ts'
import { completeJobTx } from '../src/outbox/settle.ts'
import { deadLetterCrashLoopedDeliveryTx } from '../src/platform/webhook-deliveries-sql.ts'
import type { WebhookJobData } from './webhook-deliver.ts'

/**
 * The crash-loop queue of events out (`webhook-delivery-dlq`), as `jobs/crash-loop-queue.ts` is for
 * messages: a delivery job that crashed its worker past pg-boss's retry limit dead-letters its
 * delivery `worker_crash_loop` (staff see it and can redrive it), in the commit that settles the
 * crash-loop job. Only pg-boss's own record of the delivery's current job counts.
 */
export function createWebhookCrashLoopHandler(deps: { db: Knex; boss: PgBoss; clock: () => Date; logger: Logger }) {
  return async (jobs: Job<WebhookJobData>[]): Promise<void> => {
    for (const job of jobs) {
      const deliveryId = typeof job.data?.deliveryId === 'string' ? job.data.deliveryId : ''
      const deadLettered = await deps.db.transaction(async (trx) => {
        const source = /^\d{1,18}$/.test(deliveryId)
          ? await crashLoopSourceTx(trx, { crashLoop: QUEUES.webhookCrashLoop, source: QUEUES.webhookDelivery }, job.id, {
              key: 'deliveryId',
              value: deliveryId,
            })
          : undefined
        const done = source !== undefined && (await deadLetterCrashLoopedDeliveryTx(trx, deliveryId, source, deps.clock()))
        await completeJobTx(trx, deps.boss, { jobId: job.id, retryCount: job.retryCount }, QUEUES.webhookCrashLoop)
        return done
      })
      deps.logger.error('webhook delivery job crash-looped', { deliveryId: deliveryId || undefined, deadLettered })
    }
  }
}
