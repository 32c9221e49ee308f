import type { Knex } from 'knex'
import type { Channel, Purpose } from './constants.ts'

/**
 * The staff views of the outbox, each through its SECURITY DEFINER function, which checks the
 * staff session from its token hash itself (42501 otherwise) and returns masked destinations only.
 * The gauges are counts for /metrics and need no session.
 */

/** What `outbox.backlog_summary` and `outbox.gauge_summary` count. */
export type CountsRow = {
  pending: number
  leased: number
  published: number
  dead_lettered: number
  oldest_due_pending_age_seconds: number | null
  queued: number
  deferred: number
  active: number
  failed: number
  dead_letters_last_24h: Record<string, number>
}

export async function backlogSummary(db: Knex, sessionTokenHash: Buffer, now: Date): Promise<CountsRow> {
  const { rows } = await db.raw<{ rows: CountsRow[] }>('SELECT * FROM outbox.backlog_summary(?, ?)', [sessionTokenHash, now])
  return rows[0]!
}

export async function gaugeSummary(db: Knex, now: Date): Promise<CountsRow> {
  const { rows } = await db.raw<{ rows: CountsRow[] }>('SELECT * FROM outbox.gauge_summary(?)', [now])
  return rows[0]!
}

/** One row of `outbox.dead_letter_page`. */
export type DeadLetterPageRow = {
  message_id: string
  purpose: Purpose
  channel: Channel
  masked_destination: string
  attempt_count: number
  reason: string
  last_failure_class: string | null
  dead_lettered_at: Date
  expires_at: Date
}

/** A keyset page of dead letters, newest first: `after` goes to older entries, `before` to newer; `limit` rows at most. */
export async function deadLetterPageRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  page: { limit: number; after?: { at: Date; id: string }; before?: { at: Date; id: string } },
): Promise<DeadLetterPageRow[]> {
  const { rows } = await db.raw<{ rows: DeadLetterPageRow[] }>('SELECT * FROM outbox.dead_letter_page(?, ?, ?, ?, ?, ?, ?)', [
    sessionTokenHash,
    now,
    page.limit,
    page.after?.at ?? null,
    page.after?.id ?? null,
    page.before?.at ?? null,
    page.before?.id ?? null,
  ])
  return rows
}

/** What `outbox.reissue_candidate` found: a refusal, or the locked dead letter's challenge and that challenge's own identifier as the destination. */
export type ReissueCandidateRow = {
  refusal: string | null
  purpose: Purpose
  challenge_id: string
  channel: Channel
  destination: string
  locale: string
  expires_at: Date
}

/** Checks and locks a dead letter and its challenge for a staff reissue, in the caller's transaction. */
export async function reissueCandidateTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  messageId: string,
  now: Date,
): Promise<ReissueCandidateRow> {
  const { rows } = await trx.raw<{ rows: ReissueCandidateRow[] }>('SELECT * FROM outbox.reissue_candidate(?, ?, ?)', [
    sessionTokenHash,
    messageId,
    now,
  ])
  return rows[0]!
}

/** One row of `outbox.suppression_page`. */
export type SuppressionRow = {
  id: string
  channel: string
  masked_destination: string
  reason: string
  since: Date
  message_id: string | null
}

/** A keyset page of suppressions, newest first, `limit` rows at most. */
export async function suppressionPageRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  page: { limit: number; after?: { since: Date; id: string } },
): Promise<SuppressionRow[]> {
  const { rows } = await db.raw<{ rows: SuppressionRow[] }>('SELECT * FROM outbox.suppression_page(?, ?, ?, ?, ?)', [
    sessionTokenHash,
    now,
    page.limit,
    page.after?.since ?? null,
    page.after?.id ?? null,
  ])
  return rows
}

/** Deletes a suppression and writes its audit record; false when there is no such suppression. */
export async function liftSuppressionTx(trx: Knex.Transaction, sessionTokenHash: Buffer, now: Date, id: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: { lifted: boolean }[] }>('SELECT outbox.lift_suppression(?, ?, ?) AS lifted', [
    sessionTokenHash,
    now,
    id,
  ])
  return rows[0]?.lifted ?? false
}

type Stamp = string | null
/** What `outbox.message_history` returns (jsonb: timestamps as text). */
export type HistoryRow = {
  message: Record<string, unknown> & {
    createdAt: string
    availableAt: string
    publishedAt: Stamp
    deadLetteredAt: Stamp
    expiresAt: string
  }
  attempts: (Record<string, unknown> & { retryAfterAt: Stamp; attemptedAt: string })[]
  deadLetter: (Record<string, unknown> & { deadLetteredAt: string }) | null
  events: (Record<string, unknown> & { occurredAt: string; receivedAt: string })[]
}

/** One message's history, or null when there is no such message. */
export async function messageHistoryRow(db: Knex, sessionTokenHash: Buffer, messageId: string): Promise<HistoryRow | null> {
  const { rows } = await db.raw<{ rows: { history: HistoryRow | null }[] }>('SELECT outbox.message_history(?, ?) AS history', [
    sessionTokenHash,
    messageId,
  ])
  return rows[0]?.history ?? null
}
