import type { Knex } from 'knex'
import { cappedRetryAfter, HINTLESS_BACKOFF_CHANNELS, pauseCeiling, throttleBackoff, type PausePolicy } from './provider-pause.ts'
import type { Channel } from './constants.ts'

const PAUSES = 'outbox.provider_pauses'

/**
 * Pauses a channel until `until`, never shortening a pause already in place, and never leaving one
 * past `now + maxPauseSeconds` (which also cuts short a longer pause written before the cap existed).
 */
export async function pauseChannelTx(
  trx: Knex.Transaction,
  channel: Channel,
  until: Date,
  now: Date,
  policy: Pick<PausePolicy, 'maxPauseSeconds'>,
): Promise<void> {
  const ceiling = pauseCeiling(now, policy)
  await trx.raw(
    `INSERT INTO ${PAUSES} AS p (channel, paused_until, updated_at) VALUES (?, LEAST(?::timestamptz, ?::timestamptz), ?)
     ON CONFLICT (channel) DO UPDATE SET paused_until = LEAST(GREATEST(p.paused_until, EXCLUDED.paused_until), ?::timestamptz), updated_at = EXCLUDED.updated_at`,
    [channel, until, ceiling, now, ceiling],
  )
}

/**
 * The fleet-wide answer to one THROTTLED result on a channel: its Retry-After (capped) when it gave
 * one, else (on a channel whose provider gives no hints: SES) a short jittered back-off that grows
 * while the throttling goes on. The channel's row
 * is locked so that concurrent workers grow the streak once per pause, not once each.
 */
export async function pauseForThrottleTx(
  trx: Knex.Transaction,
  channel: Channel,
  retryAfterAt: Date | null,
  now: Date,
  policy: PausePolicy,
): Promise<void> {
  const hinted = cappedRetryAfter(retryAfterAt, now, policy)
  if (hinted) return await pauseChannelTx(trx, channel, hinted, now, policy)
  if (!HINTLESS_BACKOFF_CHANNELS.has(channel)) return
  const current = await trx(PAUSES)
    .where({ channel })
    .forUpdate()
    .first<{ paused_until: Date; throttle_streak: number } | undefined>('paused_until', 'throttle_streak')
  const next = throttleBackoff(current && { pausedUntil: current.paused_until, throttleStreak: current.throttle_streak }, now, policy)
  if (!next) {
    // A pause runs already; one longer than the ceiling (written before it existed) is cut to it.
    await trx(PAUSES)
      .where({ channel })
      .andWhere('paused_until', '>', pauseCeiling(now, policy))
      .update({ paused_until: pauseCeiling(now, policy), updated_at: now })
    return
  }
  await trx.raw(
    `INSERT INTO ${PAUSES} AS p (channel, paused_until, throttle_streak, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (channel) DO UPDATE SET paused_until = GREATEST(p.paused_until, EXCLUDED.paused_until), throttle_streak = EXCLUDED.throttle_streak, updated_at = EXCLUDED.updated_at`,
    [channel, next.pausedUntil, next.throttleStreak, now],
  )
}

/** The end of each channel's pause still running at `now`. */
export async function activePausesTx(trx: Knex.Transaction, now: Date): Promise<Map<Channel, Date>> {
  const rows: { channel: Channel; paused_until: Date }[] = await trx(PAUSES)
    .select('channel', 'paused_until')
    .where('paused_until', '>', now)
  return new Map(rows.map((row) => [row.channel, row.paused_until]))
}
