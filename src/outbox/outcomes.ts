import type { Channel, DeadLetterReason, FailureClass, ProviderId } from './constants.ts'
import type { Lease } from './messages-sql.ts'
import type { ProviderTransition } from './provider-health.ts'

/**
 * The record step's vocabulary: what the delivery step hands it (`Outcome`) and what it decided
 * (`Recorded`). Its own module, so the record step's parts (src/outbox/record.ts,
 * record-batch.ts, record-deferrals.ts) share it without importing each other in a circle.
 */

/** Which provider an attempt went to, on which channel, and whether it was the probe of a provider held down. */
export type Sent = { id: ProviderId; probe: boolean; channel: Channel }

/** What happened to one claimed message, as the worker reports it to the record step. */
export type Outcome =
  | { kind: 'published'; providerMessageId: string; durationMs: number; provider?: Sent }
  /**
   * `recipientOnly`: the provider's answer was about this recipient alone; the provider's failure rate does not count it.
   * `fallback`: the channel cannot reach this recipient and a later phone channel is left: the next attempt goes at once.
   */
  | {
      kind: 'failed'
      failureClass: FailureClass
      retryAfterAt: Date | null
      durationMs: number
      provider?: Sent
      recipientOnly?: true
      fallback?: true
    }
  /** Structural fault found before any send (e.g. decryption): no attempt is spent. */
  | { kind: 'dead_letter'; reason: DeadLetterReason }
  /**
   * Not sent, no attempt spent; back at the latest of `until` (a send cap's hour, an outage hold's
   * moment, a busy provider's back-off), the pause of `pausedProvider` (the provider it was routed
   * to, paused meanwhile) and its channel's pause. `heldFor`: the providers held down that it waits
   * for (it goes at once if one of them came back). `misconfigured`: the provider refused us
   * (FailureEffect `provider_misconfigured`): it is held down at once.
   */
  | { kind: 'deferred'; until?: Date; heldFor?: readonly string[]; pausedProvider?: string; misconfigured?: Sent }

/**
 * What the record step decided, for logs and metrics. `transitions`: what the breaker did with
 * the providers' answers, on the first result of the transaction that recorded them.
 */
export type Recorded = (
  | { kind: 'published'; attemptNo: number }
  /** `pausedUntil`: after a THROTTLED answer, its provider's pause as the database now holds it. */
  | { kind: 'retry_scheduled'; attemptNo: number; nextAttemptAt: Date; pausedUntil?: Date | null }
  | { kind: 'dead_lettered'; attemptNo: number | null; reason: DeadLetterReason; pausedUntil?: Date | null }
  | { kind: 'deferred'; nextAttemptAt: Date }
  | { kind: 'lease_lost' }
) & { transitions?: ProviderTransition[] }

/** One job attempt's outcome to record. */
export type RecordRequest = { messageId: string; lease: Lease; outcome: Outcome }
