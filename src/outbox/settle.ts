import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { QUEUES } from './constants.ts'
import { releaseMessageForRetryTx, type Lease } from './messages-sql.ts'
import type { DeliveryJobData } from './constants.ts'

/** The job attempt we held was retried or expired under us: our result must not be recorded. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError'
  constructor() {
    super('lease lost')
  }
}

/**
 * Completes the pg-boss job attempt inside our transaction. pg-boss leaves a job whose attempt
 * lapsed alone and reports 0 rows: then we throw so the whole record rolls back.
 */
export async function completeJobTx(trx: Knex.Transaction, boss: PgBoss, lease: Lease, queue: string = QUEUES.delivery): Promise<void> {
  const result = await boss.complete(queue, { id: lease.jobId, retryCount: lease.retryCount }, null, { db: fromKnex(trx) })
  // pg-boss's typings leave CommandResponse empty; at runtime it carries the affected row count.
  if ((result as { affected?: number }).affected === 0) throw new LeaseLostError()
}

/** Whether a pg-boss job is still being worked on (its lease has not lapsed into retry or failure). */
export async function isJobActiveTx(trx: Knex.Transaction, jobId: string | null, queue: string = QUEUES.delivery): Promise<boolean> {
  if (!jobId) return false
  const row = await trx('pgboss.job').select('state').where({ name: queue, id: jobId }).first<{ state: string } | undefined>()
  return row?.state === 'active'
}

/** Puts a message back to pending and queues its next job for `at`, in the caller's transaction. */
export async function scheduleNextAttemptTx(trx: Knex.Transaction, boss: PgBoss, messageId: string, at: Date): Promise<void> {
  const jobId = randomUUID()
  await releaseMessageForRetryTx(trx, messageId, at, jobId)
  const data: DeliveryJobData = { messageId }
  await boss.send(QUEUES.delivery, data, { db: fromKnex(trx), startAfter: at, id: jobId })
}
