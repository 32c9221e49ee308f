import type { Knex } from 'knex'
import { QUEUES } from './constants.ts'

/**
 * The outbox's statements on pg-boss's job table, `pgboss.job`. pg-boss writes it (send, fetch,
 * complete, cancel through its own API); these statements ask it which jobs are alive, and one
 * (`releaseHeldJobsTx`) moves the start and priority of waiting jobs the outbox itself created:
 * pg-boss's `update()` does that one job per call, where a provider's recovery calls back every
 * held message of its channel in one statement. test/worker.outage-hold.test.ts pins it: the jobs
 * it moves are the ones pg-boss's fetch then hands out, in the order it set.
 */

/** Which of these pg-boss jobs are still being worked on (their lease has not lapsed into retry or failure). */
export async function activeJobsTx(
  trx: Knex.Transaction,
  jobIds: readonly string[],
  queue: string = QUEUES.delivery,
): Promise<Set<string>> {
  if (jobIds.length === 0) return new Set()
  const rows: { id: string }[] = await trx('pgboss.job').select('id').where({ name: queue, state: 'active' }).whereIn('id', jobIds)
  return new Set(rows.map((row) => row.id))
}

/**
 * SQL condition: the message aliased `m` is leased to a delivery job attempt that is still active
 * (same job, same retry count). Takes no bindings; `m` must be `outbox.security_outbox_messages`.
 */
export const LEASE_HELD_BY_LIVE_JOB = `EXISTS (
          SELECT FROM pgboss.job j
           WHERE j.name = '${QUEUES.delivery}' AND j.id = m.lease_job_id AND j.state = 'active' AND j.retry_count = m.lease_retry_count)`

/**
 * Whether a crash-loop queue job is pg-boss's own record of a real crash loop of this message:
 * pg-boss files a crash-loop job with `source_name`/`source_id` naming the delivery job that failed past
 * its retries. The job is believed only if that delivery job exists, really is `failed`, carries
 * this message, and is the message's current job. A row inserted into the crash-loop queue by
 * anyone else (a forged source, a job that never failed, an older job) dead-letters nothing.
 */
export async function isRealCrashLoopTx(trx: Knex.Transaction, crashLoopJobId: string, messageId: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `SELECT 1
       FROM pgboss.job d
       JOIN pgboss.job src ON src.name = d.source_name AND src.id = d.source_id
       JOIN outbox.security_outbox_messages m ON m.id = ? AND m.job_id = src.id
      WHERE d.name = ? AND d.id = ?
        AND src.name = ? AND src.state = 'failed' AND src.data->>'messageId' = ?`,
    [messageId, QUEUES.crashLoop, crashLoopJobId, QUEUES.delivery, messageId],
  )
  return rows.length > 0
}

/**
 * The job of `queues.source` whose failure past its retries the crash-loop job `crashLoopJobId` of
 * `queues.crashLoop` records, if pg-boss filed it (`source_name`/`source_id`) for a job that really is
 * `failed` and carries `data[key] = value`; undefined for a row anyone else put in the queue.
 */
export async function crashLoopSourceTx(
  trx: Knex.Transaction,
  queues: { crashLoop: string; source: string },
  crashLoopJobId: string,
  data: { key: string; value: string },
): Promise<string | undefined> {
  const { rows } = await trx.raw<{ rows: { id: string }[] }>(
    `SELECT src.id FROM pgboss.job d JOIN pgboss.job src ON src.name = d.source_name AND src.id = d.source_id
      WHERE d.name = ? AND d.id = ? AND src.name = ? AND src.state = 'failed' AND src.data->>? = ?`,
    [queues.crashLoop, crashLoopJobId, queues.source, data.key, data.value],
  )
  return rows[0]?.id
}

/**
 * A provider is back: the channel's held messages go out at once, soonest expiry first. Every
 * pending message of the channel still waiting for a later moment (held by the outage hold, or
 * waiting out a retry the outage caused) has its job's start moved to now and a priority above
 * fresh messages' (pg-boss fetches by priority, then creation): one point more for each second
 * less it has left, within a day. Messages another transaction holds are skipped (they are being
 * worked on); a message a pause or a send cap still holds is simply put back by its claim. Returns
 * how many were called back. The statement is `outbox.release_held_jobs`
 * (migrations/20261202001700_console_gaps.ts), which staff lifting a hold or a pause run too.
 */
export async function releaseHeldJobsTx(
  trx: Knex.Transaction,
  channel: string,
  now: Date,
  queue: string = QUEUES.delivery,
): Promise<number> {
  const { rows } = await trx.raw<{ rows: { released: number }[] }>('SELECT outbox.release_held_jobs(?, ?, ?) AS released', [
    channel,
    now,
    queue,
  ])
  return Number(rows[0]?.released ?? 0)
}
