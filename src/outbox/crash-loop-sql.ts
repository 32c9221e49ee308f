import type { Knex } from 'knex'
import { QUEUES } from './constants.ts'

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
