import type { Knex } from 'knex'
import { preparedRaw } from '../db/knex.ts'
import { DESTINATION_SUPPRESSED } from './delivery-events-sql.ts'
import { MESSAGE_COLUMNS, type Lease, type MessageRow } from './messages-sql.ts'

/**
 * A message the common-case claim leased, with its sealed envelope; `suppressed`: its destination
 * is on the suppression list (read in the same statement, before any send).
 */
export type LeasedWithEnvelope = MessageRow & { envelope: string; suppressed: boolean }

/**
 * One statement, no BEGIN/COMMIT round trips: code messages that are pending (or leased under an
 * earlier attempt of the same job), unexpired, on an unpaused channel and still holding their
 * envelope are locked in id order, leased to their job attempts and returned with the envelope.
 * Messages it leaves alone are simply not returned. The batch must not name one message twice.
 */
export async function leaseClaimableMessages(
  db: Knex,
  requests: readonly { messageId: string; lease: Lease }[],
  now: Date,
): Promise<LeasedWithEnvelope[]> {
  const { rows } = await preparedRaw<{ rows: LeasedWithEnvelope[] }>(db, CLAIM_SQL, [
    requests.map((request) => request.messageId),
    requests.map((request) => request.lease.jobId),
    requests.map((request) => request.lease.retryCount),
    now,
    now,
    now,
  ])
  return rows
}

export const CLAIM_SQL = `WITH req AS (
       -- The arrays through scalar subqueries: the planner then costs every call for a few rows,
       -- whatever their length, so a custom plan costs what the generic one does and the prepared
       -- statement keeps its generic plan, planned once per connection (planning costs a claim more
       -- than running it; docs/performance.md).
       SELECT * FROM unnest((SELECT ?::uuid[]), (SELECT ?::uuid[]), (SELECT ?::integer[])) AS r (id, job_id, retry_count)
     ), claimable AS (
       -- Each message by its primary key alone, locked in id order, then judged on the locked row.
       -- Only the key inside the fenced subquery (OFFSET 0, and it locks), so the primary key is
       -- the one index that can answer it: with the state or expiry beside it, statistics read
       -- while no message was open made the planner walk the open-message index through a whole
       -- backlog for every claim.
       SELECT m.id
         FROM (SELECT * FROM req ORDER BY id) r
        CROSS JOIN LATERAL (
          SELECT m.id, m.state, m.lease_job_id, m.purpose, m.expires_at, m.channel
            FROM outbox.security_outbox_messages m
           WHERE m.id = r.id
          OFFSET 0
             FOR UPDATE OF m
        ) m
        WHERE (m.state = 'pending' OR (m.state = 'leased' AND m.lease_job_id = r.job_id))
          AND m.purpose <> 'invitation'
          AND m.expires_at > ?
          AND NOT EXISTS (SELECT FROM outbox.provider_pauses p WHERE p.channel = m.channel AND p.paused_until > ?)
          AND EXISTS (SELECT FROM outbox.security_outbox_ciphertexts c WHERE c.message_id = m.id)
     ), leased AS (
       UPDATE outbox.security_outbox_messages m
          SET state = 'leased', lease_job_id = req.job_id, lease_retry_count = req.retry_count, leased_at = ?
         FROM claimable JOIN req ON req.id = claimable.id
        WHERE m.id = claimable.id
       RETURNING ${MESSAGE_COLUMNS.map((column) => `m.${column}`).join(', ')}
     )
     SELECT leased.*, c.envelope,
            EXISTS (SELECT FROM outbox.security_outbox_messages m WHERE m.id = leased.id AND ${DESTINATION_SUPPRESSED('m')}) AS suppressed
       FROM leased JOIN outbox.security_outbox_ciphertexts c ON c.message_id = leased.id`
