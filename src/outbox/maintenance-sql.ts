import type { Knex } from 'knex'
import { expiredReason } from './invitation-states-sql.ts'
import { deadLetterMessagesTx } from './messages-sql.ts'
import { LEASE_HELD_BY_LIVE_JOB } from './pgboss-jobs-sql.ts'

const MESSAGES = 'outbox.security_outbox_messages'

export type ExpiredRow = { id: string; purpose: string; job_id: string | null }

/**
 * Open messages past their expiry that no live worker holds: pending ones, and leased ones whose
 * pg-boss claim lapsed (the job is no longer active under the lease's attempt). Locked with
 * SKIP LOCKED, so a worker mid-claim or mid-record always wins the row.
 */
export async function lockExpiredUnclaimedTx(trx: Knex.Transaction, now: Date, limit: number): Promise<ExpiredRow[]> {
  const { rows } = await trx.raw<{ rows: ExpiredRow[] }>(
    `SELECT m.id, m.purpose, m.job_id
       FROM ${MESSAGES} m
      WHERE m.state IN ('pending', 'leased')
        AND m.expires_at <= ?
        AND NOT ${LEASE_HELD_BY_LIVE_JOB}
      ORDER BY m.expires_at
      LIMIT ?
      FOR UPDATE OF m SKIP LOCKED`,
    [now, limit],
  )
  return rows
}

/** Dead-letters a batch of expired messages (three statements, as any dead-lettering). */
export async function deadLetterExpiredTx(trx: Knex.Transaction, rows: ExpiredRow[], now: Date): Promise<void> {
  await deadLetterMessagesTx(
    trx,
    rows.map((row) => ({ messageId: row.id, reason: expiredReason(row.purpose), lastFailureClass: null })),
    now,
  )
}

/** Deletes up to `limit` terminal messages finished before `before` (attempts and dead letters cascade). */
export async function deleteFinishedBefore(db: Knex, state: 'published' | 'dead_lettered', before: Date, limit: number): Promise<number> {
  const column = state === 'published' ? 'published_at' : 'dead_lettered_at'
  return await db(MESSAGES)
    .whereIn('id', db(MESSAGES).select('id').where({ state }).andWhere(column, '<', before).limit(limit))
    .delete()
}

/** Deletes up to `limit` rate-limit hits older than `before`. */
export async function deleteRateLimitHitsBefore(db: Knex, before: Date, limit: number): Promise<number> {
  const result = await db.raw<{ rowCount: number }>(
    'DELETE FROM platform.rate_limit_hits WHERE ctid = ANY (ARRAY(SELECT ctid FROM platform.rate_limit_hits WHERE hit_at < ? LIMIT ?))',
    [before, limit],
  )
  return result.rowCount
}

/** One bounded pass of identity retention through its SECURITY DEFINER function. */
export async function sweepIdentity(db: Knex, now: Date, keepDays: number, limit: number) {
  const { rows } = await db.raw<{ rows: { sessions: number; elevations: number; challenges: number; abandoned_sign_ups: number }[] }>(
    'SELECT * FROM identity.sweep_expired(?, make_interval(days => ?), ?)',
    [now, keepDays, limit],
  )
  const row = rows[0] ?? { sessions: 0, elevations: 0, challenges: 0, abandoned_sign_ups: 0 }
  return { sessions: row.sessions, elevations: row.elevations, challenges: row.challenges, abandonedSignUps: row.abandoned_sign_ups }
}

/** Deletes up to `limit` invitations that ended more than `keepDays` ago and no message refers to. */
export async function sweepInvitations(db: Knex, now: Date, keepDays: number, limit: number): Promise<number> {
  const { rows } = await db.raw<{ rows: { deleted: number }[] }>(
    'SELECT organization.sweep_invitations(?, make_interval(days => ?), ?) AS deleted',
    [now, keepDays, limit],
  )
  return rows[0]?.deleted ?? 0
}

/** Deletes up to `limit` audit records older than `auditDays` and up to `limit` expired idempotency keys; returns how many in all. */
export async function sweepPlatform(db: Knex, now: Date, auditDays: number, limit: number): Promise<number> {
  const { rows } = await db.raw<{ rows: { audit_records: number; idempotency_keys: number }[] }>(
    'SELECT * FROM platform.sweep(?, ?, make_interval(days => ?))',
    [now, limit, auditDays],
  )
  const row = rows[0] ?? { audit_records: 0, idempotency_keys: 0 }
  return row.audit_records + row.idempotency_keys
}

/**
 * Deletes worker channel registrations last seen before `before`, except those that make up the
 * current available set (src/outbox/channel-registrations-sql.ts): a fleet down for longer keeps its channels.
 */
export async function deleteStaleChannelRegistrations(db: Knex, before: Date): Promise<number> {
  const result = await db.raw<{ rowCount: number }>(
    `DELETE FROM outbox.delivery_channel_registrations
      WHERE seen_at < ? AND worker_id NOT IN (SELECT worker_id FROM outbox.current_channel_registrations())`,
    [before],
  )
  return result.rowCount
}
