import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { QUEUES } from './constants.ts'
import { releaseMessageForRetryTx, type Lease } from './messages-sql.ts'
import type { DeliveryJobData } from './constants.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

/** The job attempt we held was retried or expired under us: our result must not be recorded. */
export class LeaseLostError extends SealpostError {
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
  await completeJobsTx(trx, boss, [lease], queue)
}

/** Completes several job attempts in one statement; any one that lapsed rolls the whole batch back. */
export async function completeJobsTx(
  trx: Knex.Transaction,
  boss: PgBoss,
  leases: readonly Lease[],
  queue: string = QUEUES.delivery,
): Promise<void> {
  if (leases.length === 0) return
  const jobs = leases.map((lease) => ({ id: lease.jobId, retryCount: lease.retryCount }))
  const result = await boss.complete(queue, jobs, null, { db: fromKnex(trx) })
  // pg-boss's typings leave CommandResponse empty; at runtime it carries the affected row count.
  if ((result as { affected?: number }).affected !== leases.length) throw new LeaseLostError()
}

/** Puts a message back to pending and queues its next job for `at`, in the caller's transaction. */
export async function scheduleNextAttemptTx(
  trx: Knex.Transaction,
  boss: PgBoss,
  messageId: string,
  at: Date,
  options: { attempted: boolean },
): Promise<void> {
  const jobId = randomUUID()
  await releaseMessageForRetryTx(trx, messageId, at, jobId, options.attempted)
  const data: DeliveryJobData = { messageId }
  await boss.send(QUEUES.delivery, data, { db: fromKnex(trx), startAfter: at, id: jobId })
}
