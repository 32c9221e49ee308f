import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { Channel } from './constants.ts'
import { deadLetterMessagesTx, type DeadLetter } from './messages-sql.ts'
import { activePausesTx } from './provider-pauses-sql.ts'
import { providersUpTx } from './provider-states-sql.ts'
import type { Recorded } from './record.ts'
import { waitOrExpire } from './retry-policy.ts'
import { scheduleNextAttemptTx } from './settle.ts'

/** A message put back without an attempt (capped, held for an outage, paused), at its place in the batch. */
export type Deferral = {
  index: number
  messageId: string
  message: { channel: Channel; expires_at: Date; purpose: string }
  heldUntil?: Date
  heldFor?: readonly string[]
}

/**
 * The record's last word on what it could not decide per message, once the batch's own pauses are
 * written: each deferral waits (a new job at its time) or, when the wait outlasts its code, is
 * dead-lettered unsent; each THROTTLED answer's result learns its channel's pause.
 */
export async function settleDeferralsTx(
  trx: Knex.Transaction,
  boss: PgBoss,
  {
    deferrals,
    throttledAnswers,
    results,
  }: {
    deferrals: readonly Deferral[]
    throttledAnswers: readonly { index: number; channel: Channel }[]
    results: Recorded[]
  },
  now: Date,
): Promise<void> {
  // The database's pauses are the truth (whatever cap or GREATEST they went through).
  const channelPauses = await activePausesTx(trx, now)
  for (const { index, channel } of throttledAnswers) {
    const result = results[index]!
    if (result.kind === 'retry_scheduled' || result.kind === 'dead_lettered') result.channelPausedUntil = channelPauses.get(channel) ?? null
  }
  // A message held for an outage whose provider came back meanwhile goes now: the release that
  // lifted the hold may have committed before this deferral's job existed (the rows are read
  // under a share lock, so a lift in flight is waited for, never missed).
  const cameBack = await providersUpTx(trx, [...new Set(deferrals.flatMap((deferral) => deferral.heldFor ?? []))])
  const expired: DeadLetter[] = []
  for (const { index, messageId, message, heldFor, heldUntil: asked } of deferrals) {
    let heldUntil = asked
    if (heldFor?.some((provider) => cameBack.has(provider))) heldUntil = undefined
    const paused = channelPauses.get(message.channel)
    const until = new Date(Math.max(paused?.getTime() ?? now.getTime(), heldUntil?.getTime() ?? now.getTime()))
    const fate = waitOrExpire(message, until)
    if (fate.kind === 'expire') {
      // THROTTLED when a provider's pause is why, UNAVAILABLE when an outage hold is.
      const throttled = paused !== undefined && paused.getTime() >= until.getTime()
      const lastFailureClass = throttled ? 'THROTTLED' : heldFor && heldUntil ? 'UNAVAILABLE' : null
      expired.push({ messageId, reason: fate.reason, lastFailureClass })
      results[index] = { kind: 'dead_lettered', attemptNo: null, reason: fate.reason }
    } else {
      await scheduleNextAttemptTx(trx, boss, messageId, fate.until, { attempted: false })
      results[index] = { kind: 'deferred', nextAttemptAt: fate.until }
    }
  }
  await deadLetterMessagesTx(trx, expired, now)
}
