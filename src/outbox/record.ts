import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { nextRetryAt } from '../delivery/retry-policy.ts'
import { insertAttemptTx } from './attempts-sql.ts'
import { deleteCiphertextTx } from './ciphertexts-sql.ts'
import type { DeadLetterReason, FailureClass } from './constants.ts'
import { deadLetterMessageTx, isLeasedBy, lockMessageTx, publishMessageTx, type Lease } from './messages-sql.ts'
import { pauseChannelTx } from './provider-pauses-sql.ts'
import { completeJobTx, scheduleNextAttemptTx } from './settle.ts'

/** What happened to one claimed message, as the worker reports it to `recordOutcome`. */
export type Outcome =
  | { kind: 'published'; providerMessageId: string; durationMs: number }
  | { kind: 'failed'; failureClass: FailureClass; retryAfterAt: Date | null; durationMs: number }
  /** Structural fault found before any send (e.g. decryption): no attempt is spent. */
  | { kind: 'dead_letter'; reason: DeadLetterReason }

export type RetrySettings = { maxAttempts: number; retrySchedule: readonly number[] }

/** What the record step decided, for logs and metrics. */
export type Recorded =
  | { kind: 'published'; attemptNo: number }
  | { kind: 'retry_scheduled'; attemptNo: number; nextAttemptAt: Date }
  | { kind: 'dead_lettered'; attemptNo: number | null; reason: DeadLetterReason }
  | { kind: 'lease_lost' }

/**
 * Step 5 of delivery, one short transaction: only the job attempt that still holds the lease may
 * record. The attempt row, the state change, the ciphertext delete, the next job (if any) and the
 * settlement of this job commit together or not at all.
 */
export async function recordOutcome(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  messageId: string,
  lease: Lease,
  outcome: Outcome,
  now: Date,
): Promise<Recorded> {
  return await db.transaction(async (trx): Promise<Recorded> => {
    const message = await lockMessageTx(trx, messageId)
    if (!message || !isLeasedBy(message, lease)) return { kind: 'lease_lost' }

    if (outcome.kind === 'dead_letter') {
      await deadLetterMessageTx(trx, messageId, outcome.reason, null, now)
      await completeJobTx(trx, boss, lease)
      return { kind: 'dead_lettered', attemptNo: null, reason: outcome.reason }
    }

    const attemptNo = message.attempt_count + 1
    const decided = decide(settings, attemptNo, outcome, message.expires_at, now)
    await insertAttemptTx(trx, {
      messageId,
      attemptNo,
      outcome: outcome.kind === 'published' ? 'published' : decided.kind === 'retry_scheduled' ? 'retryable_error' : 'failed',
      failureClass: outcome.kind === 'failed' ? outcome.failureClass : null,
      providerMessageId: outcome.kind === 'published' ? outcome.providerMessageId : null,
      retryAfterAt: outcome.kind === 'failed' ? outcome.retryAfterAt : null,
      durationMs: outcome.durationMs,
      attemptedAt: now,
    })
    if (decided.kind === 'published') {
      await publishMessageTx(trx, messageId, now)
      await deleteCiphertextTx(trx, messageId)
    } else if (decided.kind === 'dead_lettered') {
      await deadLetterMessageTx(trx, messageId, decided.reason, outcome.kind === 'failed' ? outcome.failureClass : null, now)
    } else {
      await scheduleNextAttemptTx(trx, boss, messageId, decided.nextAttemptAt)
    }
    if (outcome.kind === 'failed' && outcome.failureClass === 'THROTTLED' && outcome.retryAfterAt && outcome.retryAfterAt > now) {
      await pauseChannelTx(trx, message.channel, outcome.retryAfterAt, now)
    }
    await completeJobTx(trx, boss, lease)
    return decided
  })
}

/** The pure decision after an attempt: publish, retry later, or dead-letter (DESIGN §5). */
export function decide(
  settings: RetrySettings,
  attemptNo: number,
  outcome: Exclude<Outcome, { kind: 'dead_letter' }>,
  expiresAt: Date,
  now: Date,
): Exclude<Recorded, { kind: 'lease_lost' }> {
  if (outcome.kind === 'published') return { kind: 'published', attemptNo }
  if (outcome.failureClass === 'REJECTED') return { kind: 'dead_lettered', attemptNo, reason: 'provider_rejected' }
  if (attemptNo >= settings.maxAttempts) return { kind: 'dead_lettered', attemptNo, reason: 'retries_exhausted' }
  const nextAttemptAt = nextRetryAt(now, attemptNo, outcome.retryAfterAt, settings.retrySchedule)
  // A code nobody can use is never sent late.
  if (nextAttemptAt.getTime() >= expiresAt.getTime()) return { kind: 'dead_lettered', attemptNo, reason: 'challenge_expired' }
  return { kind: 'retry_scheduled', attemptNo, nextAttemptAt }
}
