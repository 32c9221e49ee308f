import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { Channel, DeadLetterReason } from './constants.ts'
import { deadLetterMessagesTx, type DeadLetter } from './messages-sql.ts'
import { activeChannelPausesTx, activeProviderPausesTx } from './provider-pauses-sql.ts'
import { providersUpTx } from './provider-states-sql.ts'
import { waitOrExpire } from './retry-policy.ts'
import { scheduleNextAttemptTx } from './settle.ts'

/** A message put back without an attempt (capped, held for an outage, paused, busy), at its place in the batch. */
export type Deferral = {
  index: number
  messageId: string
  message: { channel: Channel; expires_at: Date; purpose: string }
  heldUntil?: Date
  heldFor?: readonly string[]
  pausedProvider?: string
}

/** What became of a deferral: it waits for a later job, or it would outlast its code and is dead-lettered unsent. */
export type DeferralFate = { kind: 'deferred'; nextAttemptAt: Date } | { kind: 'dead_lettered'; attemptNo: null; reason: DeadLetterReason }

/** The pauses running at `now` as the database holds them (whatever cap or GREATEST they went through). */
export async function runningPausesTx(
  trx: Knex.Transaction,
  now: Date,
): Promise<{ providers: Map<string, Date>; channels: Map<Channel, Date> }> {
  const [providers, channels] = await Promise.all([activeProviderPausesTx(trx, now), activeChannelPausesTx(trx, now)])
  return { providers, channels }
}

/**
 * The record's last word on the messages it put back, once the batch's own pauses are written:
 * each waits until the latest of what holds it (its own `heldUntil`, the pause of the provider it
 * was routed to, its channel's pause written by the previous release) — a new job at that time —
 * or, when the wait outlasts its code, is dead-lettered unsent. A message held for an outage whose
 * provider came back meanwhile goes now: the lift may have committed before this deferral's job
 * existed (the rows are read under a share lock, so a lift in flight is waited for, never missed).
 * Returns each deferral's fate by its index.
 */
export async function settleDeferralsTx(
  trx: Knex.Transaction,
  boss: PgBoss,
  deferrals: readonly Deferral[],
  now: Date,
): Promise<Map<number, DeferralFate>> {
  const fates = new Map<number, DeferralFate>()
  if (deferrals.length === 0) return fates
  const pauses = await runningPausesTx(trx, now)
  const cameBack = await providersUpTx(trx, [...new Set(deferrals.flatMap((deferral) => deferral.heldFor ?? []))])
  const expired: DeadLetter[] = []
  for (const { index, messageId, message, heldFor, heldUntil: asked, pausedProvider } of deferrals) {
    const heldUntil = heldFor?.some((provider) => cameBack.has(provider)) ? undefined : asked
    const paused = Math.max(
      (pausedProvider && pauses.providers.get(pausedProvider)?.getTime()) || now.getTime(),
      pauses.channels.get(message.channel)?.getTime() ?? now.getTime(),
    )
    const until = new Date(Math.max(paused, heldUntil?.getTime() ?? now.getTime()))
    const fate = waitOrExpire(message, until)
    if (fate.kind === 'expire') {
      // THROTTLED when a pause is why, UNAVAILABLE when an outage hold is.
      const lastFailureClass =
        paused > now.getTime() && paused >= until.getTime() ? 'THROTTLED' : heldFor && heldUntil ? 'UNAVAILABLE' : null
      expired.push({ messageId, reason: fate.reason, lastFailureClass })
      fates.set(index, { kind: 'dead_lettered', attemptNo: null, reason: fate.reason })
    } else {
      await scheduleNextAttemptTx(trx, boss, messageId, fate.until, { attempted: false })
      fates.set(index, { kind: 'deferred', nextAttemptAt: fate.until })
    }
  }
  await deadLetterMessagesTx(trx, expired, now)
  return fates
}
