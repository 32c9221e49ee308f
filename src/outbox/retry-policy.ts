import type { DeadLetterReason, FailureClass } from './constants.ts'
import { expiredReason } from './invitation-states-sql.ts'
import { cappedRetryAfter, defaultPausePolicy, type PausePolicy } from './provider-pause.ts'
import type { HealthPolicy } from './provider-health.ts'

/**
 * `providerPause` bounds every provider-requested wait (MAX_PROVIDER_PAUSE_SECONDS; default 300 s);
 * `providerHealth` is the outage hold's policy (default `DEFAULT_HEALTH_POLICY`).
 */
export type RetrySettings = {
  maxAttempts: number
  retrySchedule: readonly number[]
  providerPause?: PausePolicy
  providerHealth?: HealthPolicy
}

/**
 * A code is worth sending only while the person can still read and type it: a last-chance attempt
 * goes out this long before expiry, never later (docs/delivery.md "Failure classes").
 */
export const LAST_CHANCE_LEAD_MS = 60_000

/** A last chance closer than this to now is not worth a job: the attempt that just failed was it. */
export const LAST_CHANCE_MIN_AHEAD_MS = 5_000

/** What a send came back with, as far as the decision after it cares. */
/** `fallback`: the channel cannot reach the recipient and a later phone channel is left (docs/delivery.md "Phone channels"). */
export type SendResult = { kind: 'published' } | { kind: 'failed'; failureClass: FailureClass; retryAfterAt: Date | null; fallback?: true }

/** What the record step does with an attempt that was sent. */
export type Decision =
  | { kind: 'published'; attemptNo: number }
  | { kind: 'retry_scheduled'; attemptNo: number; nextAttemptAt: Date }
  | { kind: 'dead_lettered'; attemptNo: number; reason: DeadLetterReason }

/** The pure decision after an attempt: publish, retry later, or dead-letter (docs/architecture.md §4, step 6). */
export function decide(
  settings: RetrySettings,
  attemptNo: number,
  outcome: SendResult,
  message: { expires_at: Date; purpose: string },
  now: Date,
): Decision {
  if (outcome.kind === 'published') return { kind: 'published', attemptNo }
  // The next phone channel at once, no back-off: the code is still good and this channel never will be for this number.
  if (outcome.fallback && attemptNo < settings.maxAttempts && now.getTime() < message.expires_at.getTime())
    return { kind: 'retry_scheduled', attemptNo, nextAttemptAt: now }
  if (outcome.failureClass === 'REJECTED') return { kind: 'dead_lettered', attemptNo, reason: 'provider_rejected' }
  if (attemptNo >= settings.maxAttempts) return { kind: 'dead_lettered', attemptNo, reason: 'retries_exhausted' }
  const providerAsked = cappedRetryAfter(outcome.retryAfterAt, now, settings.providerPause ?? defaultPausePolicy())
  const nextAttemptAt = nextRetryAt(now, attemptNo, providerAsked, settings.retrySchedule)
  if (nextAttemptAt.getTime() < message.expires_at.getTime()) return { kind: 'retry_scheduled', attemptNo, nextAttemptAt }
  // The schedule overshoots the expiry: one more try while the code is still usable, else give up now.
  const lastChanceAt = lastChanceBefore(message.expires_at, now, providerAsked)
  if (lastChanceAt) return { kind: 'retry_scheduled', attemptNo, nextAttemptAt: lastChanceAt }
  // A code nobody can use is never sent late.
  return { kind: 'dead_lettered', attemptNo, reason: expiredReason(message.purpose) }
}

/**
 * A message put back without spending an attempt (a provider's pause, a send cap, an outage hold)
 * waits until `until`, unless its code would be useless by then: a code is never sent late, so it
 * is dead-lettered as expired now. The one home of that rule for the claim and the record steps.
 */
export function waitOrExpire(
  message: { expires_at: Date; purpose: string },
  until: Date,
): { kind: 'wait'; until: Date } | { kind: 'expire'; reason: DeadLetterReason } {
  if (until.getTime() >= message.expires_at.getTime()) return { kind: 'expire', reason: expiredReason(message.purpose) }
  return { kind: 'wait', until }
}

/**
 * `expires_at − LAST_CHANCE_LEAD_MS` when that is at least `LAST_CHANCE_MIN_AHEAD_MS` away and not
 * before the provider's (capped) Retry-After; otherwise null. Once that attempt has failed, the
 * moment is behind the clock, so a message gets at most one last chance.
 */
function lastChanceBefore(expiresAt: Date, now: Date, providerAsked: Date | null): Date | null {
  const at = expiresAt.getTime() - LAST_CHANCE_LEAD_MS
  if (at - now.getTime() < LAST_CHANCE_MIN_AHEAD_MS) return null
  if (providerAsked && at < providerAsked.getTime()) return null
  return new Date(at)
}

/**
 * When attempt `attemptNo` (1-based) failed retryably: now + the schedule's delay for it, or the
 * provider's Retry-After when that is later. A Retry-After in the past or invalid is ignored.
 */
export function nextRetryAt(now: Date, attemptNo: number, retryAfterAt: Date | null, schedule: readonly number[]): Date {
  const delay = schedule[Math.min(attemptNo, schedule.length) - 1] ?? 0
  const scheduled = now.getTime() + delay
  const providerAsked = retryAfterAt && Number.isFinite(retryAfterAt.getTime()) ? retryAfterAt.getTime() : 0
  return new Date(Math.max(scheduled, providerAsked))
}
