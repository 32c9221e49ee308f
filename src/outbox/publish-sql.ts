import type { Knex } from 'knex'
import { preparedRaw } from '../db/knex.ts'
import type { Lease } from './messages-sql.ts'
import type { Channel } from './constants.ts'

/** A successful send to record: its message, the job attempt that claims to hold it, the provider's answer. */
export type Publication = {
  messageId: string
  lease: Lease
  providerMessageId: string
  durationMs: number
  provider: string | null
  /** The channel it went out on (null: the message's own). */
  channel: Channel | null
}

/**
 * Publications in one statement: locks in id order the messages still leased to these very job
 * attempts, inserts their attempt rows, publishes them and deletes their ciphertexts. Returns the
 * messages it locked with their attempt count before this attempt; a message no longer leased to
 * its attempt is not returned and records nothing.
 */
export async function publishLeasedMessagesTx(
  trx: Knex.Transaction,
  publications: readonly Publication[],
  now: Date,
): Promise<{ id: string; attempt_count: number; channel: Channel }[]> {
  const { rows } = await preparedRaw<{ rows: { id: string; attempt_count: number; channel: Channel }[] }>(trx, PUBLISH_SQL, [
    publications.map((publication) => publication.messageId),
    publications.map((publication) => publication.lease.jobId),
    publications.map((publication) => publication.lease.retryCount),
    publications.map((publication) => publication.providerMessageId),
    publications.map((publication) => Math.max(0, Math.round(publication.durationMs))),
    publications.map((publication) => publication.provider) as string[],
    publications.map((publication) => publication.channel) as string[],
    now,
    now,
  ])
  return rows
}

export const PUBLISH_SQL = `
  WITH req AS (
    -- The arrays through scalar subqueries, so the prepared statement keeps its generic plan (why:
    -- the claim's, src/outbox/claim-sql.ts).
    SELECT * FROM unnest((SELECT ?::uuid[]), (SELECT ?::uuid[]), (SELECT ?::integer[]), (SELECT ?::text[]), (SELECT ?::integer[]), (SELECT ?::text[]), (SELECT ?::text[])) AS r (id, job_id, retry_count, provider_message_id, duration_ms, provider, channel)
  ), locked AS (
    -- Each message by its primary key alone, locked in id order, then judged on the locked row (as
    -- the claim does, src/outbox/claim-sql.ts): never a walk of the open-message index.
    SELECT m.id, m.attempt_count, m.channel
      FROM (SELECT * FROM req ORDER BY id) r
     CROSS JOIN LATERAL (
       SELECT m.id, m.attempt_count, m.channel, m.state, m.lease_job_id, m.lease_retry_count
         FROM outbox.security_outbox_messages m
        WHERE m.id = r.id
       OFFSET 0
          FOR UPDATE OF m
     ) m
     WHERE m.state = 'leased' AND m.lease_job_id = r.job_id AND m.lease_retry_count = r.retry_count
  ), attempts AS (
    INSERT INTO outbox.security_outbox_attempts (message_id, attempt_no, outcome, failure_class, provider_message_id, retry_after_at, duration_ms, attempted_at, provider, channel)
    SELECT locked.id, locked.attempt_count + 1, 'published', NULL, req.provider_message_id, NULL, req.duration_ms, ?, req.provider, COALESCE(req.channel, locked.channel)
      FROM locked JOIN req ON req.id = locked.id
    RETURNING message_id
  ), published AS (
    -- Reads the attempts' output, so each attempt (and its trigger's lease check) comes first.
    UPDATE outbox.security_outbox_messages m
       SET state = 'published', published_at = ?, attempt_count = m.attempt_count + 1
      FROM attempts
     WHERE m.id = attempts.message_id
  ), deleted AS (
    DELETE FROM outbox.security_outbox_ciphertexts c USING locked WHERE c.message_id = locked.id
  )
  SELECT id, attempt_count, channel FROM locked`
