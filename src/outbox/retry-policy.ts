import type { DeadLetterReason, FailureClass } from './constants.ts'
import { expiredReason } from './invitation-states-sql.ts'
import { cappedRetryAfter, defaultPausePolicy, type PausePolicy } from './provider-pause.ts'

/** `providerPause` bounds every provider-requested wait (MAX_PROVIDER_PAUSE_SECONDS; default 300 s). */
export type RetrySettings = { maxAttempts: number; retrySchedule: readonly number[]; providerPause?: PausePolicy }

/** What a send came back with, as far as the decision after it cares. */
export type SendResult = { kind: 'published' } | { kind: 'failed'; failureClass: FailureClass; retryAfterAt: Date | null }

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
  if (outcome.failureClass === 'REJECTED') return { kind: 'dead_lettered', attemptNo, reason: 'provider_rejected' }
  if (attemptNo >= settings.maxAttempts) return { kind: 'dead_lettered', attemptNo, reason: 'retries_exhausted' }
  const providerAsked = cappedRetryAfter(outcome.retryAfterAt, now, settings.providerPause ?? defaultPausePolicy())
  const nextAttemptAt = nextRetryAt(now, attemptNo, providerAsked, settings.retrySchedule)
  // A code nobody can use is never sent late.
  if (nextAttemptAt.getTime() >= message.expires_at.getTime())
    return { kind: 'dead_lettered', attemptNo, reason: expiredReason(message.purpose) }
  return { kind: 'retry_scheduled', attemptNo, nextAttemptAt }
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
