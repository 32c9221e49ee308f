import { cappedRetryAfter } from '../outbox/provider-pause.ts'
import { nextRetryAt } from '../outbox/retry-policy.ts'
import { WEBHOOK_FAILURES } from './event-types.ts'

/** WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_SCHEDULE (ms) and the cap on a receiver's Retry-After (MAX_PROVIDER_PAUSE_SECONDS). */
export type WebhookRetrySettings = { maxAttempts: number; retrySchedule: readonly number[]; maxRetryAfterSeconds: number }

/** What one attempt's answer came to, as far as the decision cares. */
export type WebhookOutcome =
  | { kind: 'answered'; status: number; retryAfterAt: Date | null }
  | { kind: 'unsent' }
  | { kind: 'failed'; failure: 'timeout' | 'connection_failed' }

export type WebhookDecision =
  | { kind: 'delivered'; status: number }
  | { kind: 'retry'; at: Date; status: number | null; failure: string }
  | { kind: 'dead_lettered'; status: number | null; failure: string }

/**
 * The pure decision after attempt `attemptNo` (docs/events.md "Retries"): a 2xx is delivered;
 * 408, 429, 5xx, a timeout or a reset is retried on the schedule, or at the receiver's Retry-After
 * when later (capped); any other answer (4xx, a redirect) dead-letters at once, and so does a
 * host the SSRF guard refused (nothing was sent); the last attempt failing dead-letters.
 */
export function decideWebhook(settings: WebhookRetrySettings, attemptNo: number, outcome: WebhookOutcome, now: Date): WebhookDecision {
  if (outcome.kind === 'unsent') return { kind: 'dead_lettered', status: null, failure: WEBHOOK_FAILURES.addressRefused }
  const status = outcome.kind === 'answered' ? outcome.status : null
  if (status !== null && status >= 200 && status < 300) return { kind: 'delivered', status }
  const retryable = status === null || status === 408 || status === 429 || status >= 500
  if (!retryable) return { kind: 'dead_lettered', status, failure: WEBHOOK_FAILURES.rejected }
  if (attemptNo >= settings.maxAttempts) return { kind: 'dead_lettered', status, failure: WEBHOOK_FAILURES.retriesExhausted }
  const asked =
    outcome.kind === 'answered' ? cappedRetryAfter(outcome.retryAfterAt, now, { maxPauseSeconds: settings.maxRetryAfterSeconds }) : null
  const failure = outcome.kind === 'failed' ? outcome.failure : WEBHOOK_FAILURES.retryable
  return { kind: 'retry', at: nextRetryAt(now, attemptNo, asked, settings.retrySchedule), status, failure }
}
