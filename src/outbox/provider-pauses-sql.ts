import type { Knex } from 'knex'
import { cappedRetryAfter, HINTLESS_BACKOFF_PROVIDERS, pauseCeiling, throttleBackoff, type PausePolicy } from './provider-pause.ts'
import type { Channel } from './constants.ts'

/** Pauses per provider: what this release writes (migration 20261206006100). */
const PAUSED = 'outbox.paused_providers'
/** Pauses per channel: what the previous release's worker writes; still honoured, never written. */
const CHANNEL_PAUSES = 'outbox.provider_pauses'

/** The provider a THROTTLED answer came from, and its channel. */
export type ThrottledProvider = { provider: string; channel: Channel }

/**
 * Pauses a provider until `until`, never shortening a pause already in place, and never leaving one
 * past `now + maxPauseSeconds`.
 */
async function pauseProviderTx(
  trx: Knex.Transaction,
  throttled: ThrottledProvider,
  until: Date,
  now: Date,
  policy: Pick<PausePolicy, 'maxPauseSeconds'>,
): Promise<void> {
  const ceiling = pauseCeiling(now, policy)
  await trx.raw(
    `INSERT INTO ${PAUSED} AS p (provider, channel, paused_until, updated_at) VALUES (?, ?, LEAST(?::timestamptz, ?::timestamptz), ?)
     ON CONFLICT (provider) DO UPDATE SET paused_until = LEAST(GREATEST(p.paused_until, EXCLUDED.paused_until), ?::timestamptz), updated_at = EXCLUDED.updated_at`,
    [throttled.provider, throttled.channel, until, ceiling, now, ceiling],
  )
}

/**
 * The fleet-wide answer to one THROTTLED result from a provider: its Retry-After (capped) when it
 * gave one, else (for a provider that gives no hints: SES, SMTP) a short jittered back-off that
 * grows while the throttling goes on. The provider's row is locked so that concurrent workers grow
 * the streak once per pause, not once each. Its channel's other providers go on.
 */
export async function pauseForThrottleTx(
  trx: Knex.Transaction,
  throttled: ThrottledProvider,
  retryAfterAt: Date | null,
  now: Date,
  policy: PausePolicy,
): Promise<void> {
  const hinted = cappedRetryAfter(retryAfterAt, now, policy)
  if (hinted) return await pauseProviderTx(trx, throttled, hinted, now, policy)
  if (!HINTLESS_BACKOFF_PROVIDERS.has(throttled.provider)) return
  const current = await trx(PAUSED)
    .where({ provider: throttled.provider })
    .forUpdate()
    .first<{ paused_until: Date; throttle_streak: number } | undefined>('paused_until', 'throttle_streak')
  const next = throttleBackoff(current && { pausedUntil: current.paused_until, throttleStreak: current.throttle_streak }, now, policy)
  if (!next) return
  await trx.raw(
    `INSERT INTO ${PAUSED} AS p (provider, channel, paused_until, throttle_streak, updated_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (provider) DO UPDATE SET paused_until = GREATEST(p.paused_until, EXCLUDED.paused_until), throttle_streak = EXCLUDED.throttle_streak, updated_at = EXCLUDED.updated_at`,
    [throttled.provider, throttled.channel, next.pausedUntil, next.throttleStreak, now],
  )
}

/** The end of each provider's pause still running at `now`. */
export async function activeProviderPausesTx(trx: Knex.Transaction, now: Date): Promise<Map<string, Date>> {
  const rows: { provider: string; paused_until: Date }[] = await trx(PAUSED)
    .select('provider', 'paused_until')
    .where('paused_until', '>', now)
  return new Map(rows.map((row) => [row.provider, row.paused_until]))
}

/**
 * The end of each channel's pause still running at `now`: written by the previous release's worker
 * during a rolling upgrade (it pauses a whole channel, within the same ceiling), honoured for every
 * provider of the channel.
 */
export async function activeChannelPausesTx(trx: Knex.Transaction, now: Date): Promise<Map<Channel, Date>> {
  const rows: { channel: Channel; paused_until: Date }[] = await trx(CHANNEL_PAUSES)
    .select('channel', 'paused_until')
    .where('paused_until', '>', now)
  return new Map(rows.map((row) => [row.channel, row.paused_until]))
}
