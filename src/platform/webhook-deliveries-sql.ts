import type { Knex } from 'knex'

/** A delivery the worker leased: its event, its endpoint's URL and sealed secrets, and this attempt's number. */
export type ClaimedDelivery = {
  id: string
  event_id: string
  type: string
  occurred_at: Date
  payload: Record<string, unknown>
  endpoint_id: string
  url: string
  secret_envelope: string
  previous_secret_envelope: string | null
  previous_secret_until: Date | null
  attempt_count: number
}

/**
 * Leases up to `limit` due deliveries of enabled endpoints until `leaseUntil`, counting the
 * attempt now: a worker that dies between send and record leaves the lease to lapse, and the
 * delivery goes out again with the same event id (its `webhook-id`). SKIP LOCKED: workers never
 * wait on each other.
 */
export async function claimDueDeliveries(db: Knex, now: Date, leaseUntil: Date, limit: number): Promise<ClaimedDelivery[]> {
  const { rows } = await db.raw<{ rows: ClaimedDelivery[] }>(
    `WITH due AS (
       SELECT d.id FROM platform.webhook_deliveries d
        WHERE d.state = 'pending' AND d.next_attempt_at <= :now AND (d.leased_until IS NULL OR d.leased_until <= :now)
        ORDER BY d.next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED
     ), leased AS (
       UPDATE platform.webhook_deliveries d SET leased_until = :leaseUntil, attempt_count = d.attempt_count + 1
         FROM due WHERE d.id = due.id
       RETURNING d.id, d.event_id, d.endpoint_id, d.attempt_count
     )
     SELECT l.id::text, l.event_id, ev.type, ev.occurred_at, ev.payload, l.endpoint_id, e.url, e.secret_envelope,
            e.previous_secret_envelope, e.previous_secret_until, l.attempt_count
       FROM leased l JOIN platform.events ev ON ev.id = l.event_id JOIN platform.webhook_endpoints e ON e.id = l.endpoint_id`,
    { now, leaseUntil, limit },
  )
  return rows
}

/** What the record step writes for one attempt. */
export type DeliveryRecord =
  | { state: 'delivered'; status: number }
  | { state: 'pending'; nextAttemptAt: Date; status: number | null; failure: string }
  | { state: 'dead_lettered'; status: number | null; failure: string }

/**
 * Records a pass's attempts in one statement, each only while this worker still holds it (same
 * attempt, still pending): returns the ids recorded; a missing id lost its lease (another worker
 * took the delivery over, or staff disabled the endpoint).
 */
export async function recordDeliveryAttempts(
  db: Knex,
  attempts: { delivery: { id: string; attempt_count: number }; record: DeliveryRecord }[],
  now: Date,
): Promise<Set<string>> {
  if (attempts.length === 0) return new Set()
  const rows = attempts.map(({ delivery, record }) => ({
    id: delivery.id,
    attempt_count: delivery.attempt_count,
    state: record.state,
    next_attempt_at: record.state === 'pending' ? record.nextAttemptAt.toISOString() : null,
    status: record.status,
    failure: record.state === 'delivered' ? null : record.failure,
  }))
  const { rows: recorded } = await db.raw<{ rows: { id: string }[] }>(
    `UPDATE platform.webhook_deliveries d
        SET state = v.state, leased_until = NULL, last_status_code = v.status, last_failure = v.failure,
            finished_at = CASE WHEN v.state = 'pending' THEN NULL ELSE ?::timestamptz END,
            next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at)
       FROM jsonb_to_recordset(?::jsonb) AS v(id bigint, attempt_count integer, state text, next_attempt_at timestamptz, status integer, failure text)
      WHERE d.id = v.id AND d.attempt_count = v.attempt_count AND d.state = 'pending'
      RETURNING d.id::text`,
    [now, JSON.stringify(rows)],
  )
  return new Set(recorded.map((row) => row.id))
}

/** Deletes up to `limit` events that occurred before `before` with their deliveries (cascade). */
export async function deleteEventsBefore(db: Knex, before: Date, limit: number): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `DELETE FROM platform.events WHERE id IN (SELECT id FROM platform.events WHERE occurred_at < ? ORDER BY occurred_at LIMIT ?)`,
    [before, limit],
  )
  return rowCount
}
