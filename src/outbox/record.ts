import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { nextRetryAt } from '../delivery/retry-policy.ts'
import { insertAttemptsTx, type NewAttempt } from './attempts-sql.ts'
import { batchOrEach, type Failed } from './batch-or-each.ts'
import { deleteCiphertextsTx } from './ciphertexts-sql.ts'
import type { Channel, DeadLetterReason, FailureClass } from './constants.ts'
import { deadLetterMessagesTx, isLeasedBy, lockMessagesTx, publishMessagesTx, type DeadLetter, type Lease } from './messages-sql.ts'
import { expiredReason, invitationClosedReason, invitationStatesTx } from './invitations-sql.ts'
import { pauseChannelTx } from './provider-pauses-sql.ts'
import { completeJobsTx, scheduleNextAttemptTx } from './settle.ts'

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

/** One job attempt's outcome to record. */
export type RecordRequest = { messageId: string; lease: Lease; outcome: Outcome }

export async function recordOutcome(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  messageId: string,
  lease: Lease,
  outcome: Outcome,
  now: Date,
): Promise<Recorded> {
  const [recorded] = await recordOutcomes(db, boss, settings, [{ messageId, lease, outcome }], now)
  return recorded!
}

/**
 * Step 5 of delivery, one short transaction for a batch: only the job attempt that still holds a
 * message's lease may record for it. Attempt rows, state changes, ciphertext deletes, next jobs
 * and the settlement of the jobs commit together or not at all. If the batch cannot commit (one
 * job's attempt lapsed meanwhile, a deadlock), each outcome is recorded again alone, so a lost
 * lease costs only its own record.
 */
export async function recordOutcomes(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  const results = await recordOutcomesEach(db, boss, settings, requests, now)
  // The rest are recorded; the caller learns of a failure once they are.
  const failed = results.find((result): result is Failed => result.kind === 'failed')
  if (failed) throw failed.error
  return results as Recorded[]
}

/** As `recordOutcomes`, but a failure is reported per request instead of thrown (the group commit of the pipeline). */
export async function recordOutcomesEach(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<(Recorded | Failed)[]> {
  return await batchOrEach(requests, (batch) => recordBatch(db, boss, settings, batch, now))
}

async function recordBatch(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  return await db.transaction(async (trx): Promise<Recorded[]> => {
    const rows = new Map((await lockMessagesTx(trx, requests.map((request) => request.messageId))).map((row) => [row.id, row]))
    const attempts: NewAttempt[] = []
    const published: string[] = []
    const deadLetters: DeadLetter[] = []
    const retries: { messageId: string; at: Date }[] = []
    const pauses: { channel: Channel; until: Date }[] = []
    const settled: Lease[] = []

    // An invitation revoked, accepted or expired while its message was out is never requeued.
    const invitations = await invitationStatesTx(trx, requests.flatMap((request) => {
      const invitationId = rows.get(request.messageId)?.invitation_id
      return invitationId && request.outcome.kind === 'failed' ? [invitationId] : []
    }))
    const results = requests.map(({ messageId, lease, outcome }): Recorded => {
      const message = rows.get(messageId)
      if (!message || !isLeasedBy(message, lease)) return { kind: 'lease_lost' }
      rows.delete(messageId)
      settled.push(lease)
      if (outcome.kind === 'dead_letter') {
        deadLetters.push({ messageId, reason: outcome.reason, lastFailureClass: null })
        return { kind: 'dead_lettered', attemptNo: null, reason: outcome.reason }
      }
      const attemptNo = message.attempt_count + 1
      let decided = decide(settings, attemptNo, outcome, message, now)
      const closed = decided.kind === 'retry_scheduled' && message.invitation_id ? invitationClosedReason(invitations.get(message.invitation_id), now) : undefined
      if (closed) decided = { kind: 'dead_lettered', attemptNo, reason: closed }
      attempts.push({
        messageId,
        attemptNo,
        outcome: outcome.kind === 'published' ? 'published' : decided.kind === 'retry_scheduled' ? 'retryable_error' : 'failed',
        failureClass: outcome.kind === 'failed' ? outcome.failureClass : null,
        providerMessageId: outcome.kind === 'published' ? outcome.providerMessageId : null,
        retryAfterAt: outcome.kind === 'failed' ? outcome.retryAfterAt : null,
        durationMs: outcome.durationMs,
        attemptedAt: now,
      })
      if (decided.kind === 'published') published.push(messageId)
      else if (decided.kind === 'dead_lettered') deadLetters.push({ messageId, reason: decided.reason, lastFailureClass: outcome.kind === 'failed' ? outcome.failureClass : null, attempted: true })
      else retries.push({ messageId, at: decided.nextAttemptAt })
      if (outcome.kind === 'failed' && outcome.failureClass === 'THROTTLED' && outcome.retryAfterAt && outcome.retryAfterAt > now) {
        pauses.push({ channel: message.channel, until: outcome.retryAfterAt })
      }
      return decided
    })

    await insertAttemptsTx(trx, attempts)
    await publishMessagesTx(trx, published, now)
    await deleteCiphertextsTx(trx, published)
    await deadLetterMessagesTx(trx, deadLetters, now)
    for (const { messageId, at } of retries) await scheduleNextAttemptTx(trx, boss, messageId, at, { attempted: true })
    for (const { channel, until } of pauses) await pauseChannelTx(trx, channel, until, now)
    await completeJobsTx(trx, boss, settled)
    return results
  })
}

/** The pure decision after an attempt: publish, retry later, or dead-letter (DESIGN §5). */
export function decide(
  settings: RetrySettings,
  attemptNo: number,
  outcome: Exclude<Outcome, { kind: 'dead_letter' }>,
  message: { expires_at: Date; purpose: string },
  now: Date,
): Exclude<Recorded, { kind: 'lease_lost' }> {
  if (outcome.kind === 'published') return { kind: 'published', attemptNo }
  if (outcome.failureClass === 'REJECTED') return { kind: 'dead_lettered', attemptNo, reason: 'provider_rejected' }
  if (attemptNo >= settings.maxAttempts) return { kind: 'dead_lettered', attemptNo, reason: 'retries_exhausted' }
  const nextAttemptAt = nextRetryAt(now, attemptNo, outcome.retryAfterAt, settings.retrySchedule)
  // A code nobody can use is never sent late.
  if (nextAttemptAt.getTime() >= message.expires_at.getTime()) return { kind: 'dead_lettered', attemptNo, reason: expiredReason(message.purpose) }
  return { kind: 'retry_scheduled', attemptNo, nextAttemptAt }
}
