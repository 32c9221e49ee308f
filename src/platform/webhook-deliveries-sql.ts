import type { Knex } from 'knex'

/** A pending delivery that now has a pg-boss job of its own, to be sent in the same transaction. */
export type QueuedDelivery = { id: string; job_id: string; endpoint_id: string; next_attempt_at: Date }

/**
 * The fan-out (docs/events.md "Delivery"), in the caller's transaction: up to `limit` events not
 * fanned out yet get a pending delivery row for each endpoint noted on them that is still enabled,
 * each with the id of the job that will deliver it, and are marked fanned out. Locked SKIP LOCKED:
 * two fan-outs never take the same event.
 */
export async function fanOutEventsTx(
  trx: Knex.Transaction,
  now: Date,
  limit: number,
): Promise<{ events: number; queued: QueuedDelivery[] }> {
  const { rows } = await trx.raw<{ rows: { events: number; queued: QueuedDelivery[] }[] }>(
    `WITH due AS (
       SELECT id, fan_out_to FROM platform.events WHERE fan_out_to IS NOT NULL ORDER BY occurred_at LIMIT ? FOR UPDATE SKIP LOCKED
     ), fanned AS (
       UPDATE platform.events ev SET fan_out_to = NULL FROM due WHERE ev.id = due.id RETURNING ev.id
     ), created AS (
       INSERT INTO platform.webhook_deliveries (event_id, endpoint_id, next_attempt_at, leased_until, job_id)
       SELECT due.id, e.id, ?, 'infinity', gen_random_uuid()
         FROM due CROSS JOIN LATERAL unnest(due.fan_out_to) AS t (endpoint_id)
         JOIN platform.webhook_endpoints e ON e.id = t.endpoint_id AND e.disabled_at IS NULL
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
       RETURNING id::text, job_id, endpoint_id, next_attempt_at
     )
     SELECT (SELECT count(*) FROM fanned)::int AS events,
            coalesce((SELECT json_agg(created) FROM created), '[]'::json) AS queued`,
    [limit, now],
  )
  const row = rows[0]!
  return {
    events: row.events,
    queued: row.queued.map((delivery) => ({ ...delivery, next_attempt_at: new Date(delivery.next_attempt_at) })),
  }
}

/**
 * Pending deliveries that no job owns (redriven by staff, or written before deliveries were jobs)
 * get one, in the caller's transaction, due at their `next_attempt_at`. A row the previous
 * release's worker still leases is left to it until that lease lapses (docs/upgrading.md).
 */
export async function adoptUnqueuedDeliveriesTx(trx: Knex.Transaction, now: Date, limit: number): Promise<QueuedDelivery[]> {
  const { rows } = await trx.raw<{ rows: QueuedDelivery[] }>(
    `UPDATE platform.webhook_deliveries d SET job_id = gen_random_uuid(), leased_until = 'infinity'
       FROM (SELECT id FROM platform.webhook_deliveries
              WHERE state = 'pending' AND job_id IS NULL AND (leased_until IS NULL OR leased_until <= ?)
              ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED) due
      WHERE d.id = due.id
      RETURNING d.id::text, d.job_id, d.endpoint_id, d.next_attempt_at`,
    [now, limit],
  )
  return rows
}

/** A delivery its job claimed: its event, its endpoint's URL and sealed secrets, and this attempt's number. */
export type ClaimedDelivery = {
  id: string
  job_id: string
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
 * Counts the attempt of each pending delivery its job still owns, in one statement in the caller's
 * transaction (the one that fetched the jobs), and reads what the sends need; a job that owns
 * nothing (its delivery finished, was disabled, deleted, or belongs to a newer job) gets no row.
 * The attempt is counted before the send: a worker that dies after it leaves the job to pg-boss,
 * whose retry claims again with the same event id.
 */
export async function claimDeliveriesTx(
  trx: Knex.Transaction,
  jobs: readonly { deliveryId: string; jobId: string }[],
): Promise<ClaimedDelivery[]> {
  if (jobs.length === 0) return []
  const { rows } = await trx.raw<{ rows: ClaimedDelivery[] }>(
    `WITH claimed AS (
       UPDATE platform.webhook_deliveries d SET attempt_count = d.attempt_count + 1, leased_until = 'infinity'
         FROM jsonb_to_recordset(?::jsonb) AS w (delivery_id bigint, job_id uuid)
        WHERE d.id = w.delivery_id AND d.job_id = w.job_id AND d.state = 'pending'
       RETURNING d.id, d.job_id, d.event_id, d.endpoint_id, d.attempt_count
     )
     SELECT c.id::text, c.job_id, c.event_id, ev.type, ev.occurred_at, ev.payload, c.endpoint_id, e.url, e.secret_envelope,
            e.previous_secret_envelope, e.previous_secret_until, c.attempt_count
       FROM claimed c JOIN platform.events ev ON ev.id = c.event_id JOIN platform.webhook_endpoints e ON e.id = c.endpoint_id`,
    [JSON.stringify(jobs.map((job) => ({ delivery_id: job.deliveryId, job_id: job.jobId })))],
  )
  return rows
}

/** What the record step writes for one attempt; a retry names the job that carries it. */
export type DeliveryRecord =
  | { state: 'delivered'; status: number }
  | { state: 'pending'; nextAttemptAt: Date; nextJobId: string; status: number | null; failure: string }
  | { state: 'dead_lettered'; status: number | null; failure: string }

/**
 * Records attempts in one statement in the caller's transaction, each only while the claiming job
 * still owns its delivery at the attempt it counted; returns the ids recorded. A missing id no
 * longer belonged to its job (staff disabled the endpoint, retention or an erasure deleted it).
 */
export async function recordDeliveriesTx(
  trx: Knex.Transaction,
  attempts: readonly { delivery: Pick<ClaimedDelivery, 'id' | 'job_id' | 'attempt_count'>; record: DeliveryRecord }[],
  now: Date,
): Promise<Set<string>> {
  if (attempts.length === 0) return new Set()
  const rows = attempts.map(({ delivery, record }) => ({
    id: delivery.id,
    job_id: delivery.job_id,
    attempt_count: delivery.attempt_count,
    state: record.state,
    next_attempt_at: record.state === 'pending' ? record.nextAttemptAt.toISOString() : null,
    next_job_id: record.state === 'pending' ? record.nextJobId : null,
    status: record.status,
    failure: record.state === 'delivered' ? null : record.failure,
  }))
  const { rows: recorded } = await trx.raw<{ rows: { id: string }[] }>(
    `UPDATE platform.webhook_deliveries d
        SET state = v.state, last_status_code = v.status, last_failure = v.failure,
            finished_at = CASE WHEN v.state = 'pending' THEN NULL ELSE ?::timestamptz END,
            next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at), job_id = coalesce(v.next_job_id, d.job_id),
            leased_until = CASE WHEN v.state = 'pending' THEN 'infinity'::timestamptz END
       FROM jsonb_to_recordset(?::jsonb) AS v (id bigint, job_id uuid, attempt_count integer, state text, next_attempt_at timestamptz,
                                                next_job_id uuid, status integer, failure text)
      WHERE d.id = v.id AND d.job_id = v.job_id AND d.attempt_count = v.attempt_count AND d.state = 'pending'
      RETURNING d.id::text`,
    [now, JSON.stringify(rows)],
  )
  return new Set(recorded.map((row) => row.id))
}

/**
 * Dead-letters the delivery `worker_crash_loop` if it is still pending under the job `jobId` (the
 * job pg-boss gave up on, `crashLoopSourceTx`); false when it is not.
 */
export async function deadLetterCrashLoopedDeliveryTx(
  trx: Knex.Transaction,
  deliveryId: string,
  jobId: string,
  now: Date,
): Promise<boolean> {
  const { rowCount } = await trx.raw<{ rowCount: number }>(
    `UPDATE platform.webhook_deliveries SET state = 'dead_lettered', finished_at = ?, last_failure = 'worker_crash_loop', leased_until = NULL
      WHERE id = ? AND job_id = ? AND state = 'pending'`,
    [now, deliveryId, jobId],
  )
  return rowCount > 0
}

/** Deletes up to `limit` events that occurred before `before` with their deliveries (cascade). */
export async function deleteEventsBefore(db: Knex, before: Date, limit: number): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `DELETE FROM platform.events WHERE id IN (SELECT id FROM platform.events WHERE occurred_at < ? ORDER BY occurred_at LIMIT ?)`,
    [before, limit],
  )
  return rowCount
}
