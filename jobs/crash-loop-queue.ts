import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import type { Logger } from '../src/logging/logger.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { isRealCrashLoopTx } from '../src/outbox/pgboss-jobs-sql.ts'
import { deadLetterMessageTx, lockMessageTx } from '../src/outbox/messages-sql.ts'
import { completeJobTx } from '../src/outbox/settle.ts'

/**
 * The crash-loop queue (pg-boss's dead-letter queue `security-outbox-dlq`): a delivery job that
 * crashed its worker past pg-boss's retry limit lands here: the message is
 * dead-lettered `worker_crash_loop` so a human sees it, and the crash-loop job settles in the same commit.
 * Only pg-boss's own record of a real crash loop of the message's current job counts
 * (`isRealCrashLoopTx`); any other row in the queue is settled and logged, and changes nothing.
 */
export function createCrashLoopQueueHandler(deps: { db: Knex; boss: PgBoss; clock: () => Date; logger: Logger }) {
  return async (jobs: Job<DeliveryJobData>[]): Promise<void> => {
    for (const job of jobs) {
      const messageId =
        typeof job.data?.messageId === 'string' && /^[0-9a-f-]{36}$/.test(job.data.messageId) ? job.data.messageId : undefined
      const outcome = await deps.db.transaction(async (trx) => {
        const message = messageId ? await lockMessageTx(trx, messageId) : undefined
        const open = message !== undefined && (message.state === 'pending' || message.state === 'leased')
        const real = open && (await isRealCrashLoopTx(trx, job.id, messageId!))
        if (real) await deadLetterMessageTx(trx, messageId!, 'worker_crash_loop', 'unexpected_worker_error', deps.clock())
        await completeJobTx(trx, deps.boss, { jobId: job.id, retryCount: job.retryCount }, QUEUES.crashLoop)
        return open && !real ? 'refused' : real ? 'dead_lettered' : 'nothing_open'
      })
      if (outcome === 'refused')
        deps.logger.error('crash-loop queue job refused: not a crash loop of the message’s delivery job', {
          messageId,
          jobId: job.id,
          security: true,
        })
      else deps.logger.error('delivery job crash-looped', { messageId, deadLettered: outcome === 'dead_lettered' })
    }
  }
}
