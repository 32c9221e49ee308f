import type { Knex } from 'knex'
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
  const { rows } = await db.raw<{ rows: LeasedWithEnvelope[] }>(
    `WITH req AS (
       SELECT * FROM unnest(?::uuid[], ?::uuid[], ?::integer[]) AS r (id, job_id, retry_count)
     ), claimable AS (
       SELECT m.id FROM outbox.security_outbox_messages m JOIN req ON req.id = m.id
        WHERE (m.state = 'pending' OR (m.state = 'leased' AND m.lease_job_id = req.job_id))
          AND m.purpose <> 'invitation'
          AND m.expires_at > ?
          AND NOT EXISTS (SELECT FROM outbox.provider_pauses p WHERE p.channel = m.channel AND p.paused_until > ?)
          AND EXISTS (SELECT FROM outbox.security_outbox_ciphertexts c WHERE c.message_id = m.id)
        ORDER BY m.id
        FOR UPDATE OF m
     ), leased AS (
       UPDATE outbox.security_outbox_messages m
          SET state = 'leased', lease_job_id = req.job_id, lease_retry_count = req.retry_count, leased_at = ?
         FROM claimable JOIN req ON req.id = claimable.id
        WHERE m.id = claimable.id
       RETURNING ${MESSAGE_COLUMNS.map((column) => `m.${column}`).join(', ')}
     )
     SELECT leased.*, c.envelope,
            EXISTS (SELECT FROM outbox.security_outbox_messages m WHERE m.id = leased.id AND ${DESTINATION_SUPPRESSED('m')}) AS suppressed
       FROM leased JOIN outbox.security_outbox_ciphertexts c ON c.message_id = leased.id`,
    [
      requests.map((request) => request.messageId),
      requests.map((request) => request.lease.jobId),
      requests.map((request) => request.lease.retryCount),
      now,
      now,
      now,
    ],
  )
  return rows
}
