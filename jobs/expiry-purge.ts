import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import type { Logger } from '../src/logging/logger.ts'
import type { WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { deadLetterExpiredTx, lockExpiredUnclaimedTx } from '../src/outbox/maintenance-sql.ts'
import { runTick } from './tick.ts'

export const PURGE_BATCH_SIZE = 500

export type PurgeDeps = { db: Knex; boss: PgBoss; clock: () => Date; logger: Logger; batchSize?: number; metrics?: WorkerMetrics }

/**
 * One expiry-purge pass (docs/architecture.md §5): expired messages nobody holds are dead-lettered
 * `challenge_expired` (`invitation_expired`), their ciphertexts erased and their queued jobs
 * cancelled, a bounded batch per transaction until none is left. A second pass changes nothing.
 */
export async function runExpiryPurge(deps: PurgeDeps): Promise<{ deadLettered: number; batches: number }> {
  const batchSize = deps.batchSize ?? PURGE_BATCH_SIZE
  let deadLettered = 0
  let batches = 0
  for (;;) {
    const now = deps.clock()
    const count = await deps.db.transaction(async (trx) => {
      const rows = await lockExpiredUnclaimedTx(trx, now, batchSize)
      if (rows.length === 0) return 0
      await deadLetterExpiredTx(trx, rows, now)
      const jobIds = rows.map((row) => row.job_id).filter((id): id is string => id !== null)
      if (jobIds.length > 0) await deps.boss.cancel(QUEUES.delivery, jobIds, { db: fromKnex(trx) })
      return rows.length
    })
    if (count === 0) break
    deadLettered += count
    batches += 1
    if (count < batchSize) break
  }
  return { deadLettered, batches }
}

/** The pg-boss handler: one pass, one summary line; a failure is logged and the next tick retries. */
export function createExpiryPurgeHandler(deps: PurgeDeps) {
  return () =>
    runTick(
      'expiry purge',
      deps.logger,
      () => runExpiryPurge(deps),
      (counts) => deps.metrics?.maintenanceDone('expiry_purge', counts),
    )
}
