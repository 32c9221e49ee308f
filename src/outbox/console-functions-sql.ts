import type { Knex } from 'knex'
import type { Channel, Purpose } from './constants.ts'

/**
 * The console's later staff functions (migrations/20261202001700_console_gaps.ts), each a SECURITY
 * DEFINER function that checks the staff session from its token hash itself (42501 otherwise) and
 * returns masked destinations only.
 */

/** One row of `outbox.messages_by_destination`. */
export type DestinationMessageRow = {
  message_id: string
  purpose: Purpose
  channel: Channel
  masked_destination: string
  state: string
  attempt_count: number
  created_at: Date
  expires_at: Date
  last_failure_class: string | null
  dead_letter_reason: string | null
  providers: string[]
}

/** Messages whose `destination_hmac` is one of `hmacs`, newest first, older than `beforeId` when given; `limit` rows at most. */
export async function messagesByDestinationRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  hmacs: readonly Buffer[],
  page: { limit: number; beforeId?: string },
): Promise<DestinationMessageRow[]> {
  const { rows } = await db.raw<{ rows: DestinationMessageRow[] }>('SELECT * FROM outbox.messages_by_destination(?, ?, ?::bytea[], ?, ?)', [
    sessionTokenHash,
    now,
    [...hmacs],
    page.limit,
    page.beforeId ?? null,
  ])
  return rows
}

/** Provider events received in [since, now], per provider (of the attempt that published), channel and event. */
export async function deliveryEventCountRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  since: Date,
): Promise<{ provider: string; channel: string; event: string; count: number }[]> {
  const { rows } = await db.raw<{ rows: { provider: string; channel: string; event: string; count: string }[] }>(
    'SELECT * FROM outbox.delivery_event_counts(?, ?, ?)',
    [sessionTokenHash, now, since],
  )
  return rows.map((row) => ({ ...row, count: Number(row.count) }))
}

/** The ids of dead letters of `reason` after `afterId` (id order: oldest first), `limit` at most, in the caller's transaction. */
export async function redriveCandidatesTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  now: Date,
  input: { reason: string; limit: number; afterId?: string },
): Promise<string[]> {
  const { rows } = await trx.raw<{ rows: { message_id: string }[] }>('SELECT * FROM outbox.redrive_candidates(?, ?, ?, ?, ?)', [
    sessionTokenHash,
    now,
    input.reason,
    input.limit,
    input.afterId ?? null,
  ])
  return rows.map((row) => row.message_id)
}

/** The throttle pauses running at `now`: each provider's, and a whole channel's (written by the previous release); `provider` null for the latter. */
export async function runningPauseRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
): Promise<{ channel: string; provider: string | null; paused_until: Date; throttle_streak: number }[]> {
  const { rows } = await db.raw<{ rows: { channel: string; provider: string | null; paused_until: Date; throttle_streak: number }[] }>(
    'SELECT * FROM outbox.running_pauses(?, ?)',
    [sessionTokenHash, now],
  )
  return rows
}

/** What lifting a pause or a hold did: `lifted` false when there was none; `released` messages called back. */
export type Lifted = { lifted: boolean; released: number }

/** Ends the running pauses of `channel` and of its providers now, calls its held messages back, audits; in the caller's transaction. */
export async function liftChannelPauseTx(trx: Knex.Transaction, sessionTokenHash: Buffer, now: Date, channel: string): Promise<Lifted> {
  const { rows } = await trx.raw<{ rows: Lifted[] }>('SELECT * FROM outbox.lift_channel_pause(?, ?, ?)', [sessionTokenHash, now, channel])
  return { lifted: rows[0]?.lifted ?? false, released: Number(rows[0]?.released ?? 0) }
}

/** Marks a provider held down as up, calls its channel's held messages back, audits; in the caller's transaction. */
export async function liftProviderHoldTx(trx: Knex.Transaction, sessionTokenHash: Buffer, now: Date, provider: string): Promise<Lifted> {
  const { rows } = await trx.raw<{ rows: Lifted[] }>('SELECT * FROM outbox.lift_provider_hold(?, ?, ?)', [sessionTokenHash, now, provider])
  return { lifted: rows[0]?.lifted ?? false, released: Number(rows[0]?.released ?? 0) }
}
