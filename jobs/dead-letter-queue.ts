import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import type { Logger } from '../src/logging/logger.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { deadLetterMessageTx, lockMessageTx } from '../src/outbox/messages-sql.ts'
import { completeJobTx } from '../src/outbox/settle.ts'

/**
 * A delivery job that crashed its worker past pg-boss's retry limit lands here: the message is
 * dead-lettered `worker_crash_loop` so a human sees it, and the DLQ job settles in the same commit.
 */
export function createDeadLetterQueueHandler(deps: { db: Knex; boss: PgBoss; clock: () => Date; logger: Logger }) {
  return async (jobs: Job<DeliveryJobData>[]): Promise<void> => {
    for (const job of jobs) {
      const messageId = job.data.messageId
      const changed = await deps.db.transaction(async (trx) => {
        const message = await lockMessageTx(trx, messageId)
        const open = message && (message.state === 'pending' || message.state === 'leased')
        if (open) await deadLetterMessageTx(trx, messageId, 'worker_crash_loop', 'unexpected_worker_error', deps.clock())
        await completeJobTx(trx, deps.boss, { jobId: job.id, retryCount: job.retryCount }, QUEUES.deadLetter)
        return open
      })
      deps.logger.error('delivery job crash-looped', { messageId, deadLettered: changed })
    }
  }
}
