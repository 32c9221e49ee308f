import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { withTransientRetry } from '../db/transient.ts'
import type { Logger } from '../logging/logger.ts'
import { defaultPausePolicy } from './provider-pause.ts'
import { decide, type Decision, type RetrySettings } from './retry-policy.ts'
import { insertAttemptsTx, type NewAttempt } from './attempts-sql.ts'
import { batchOrEach, type Failed } from './batch-or-each.ts'
import { publishLeasedMessagesTx } from './publish-sql.ts'
import { deleteCiphertextsTx } from './ciphertexts-sql.ts'
import { TRANSIENT_FAILURES, type Channel, type DeadLetterReason, type FailureClass, type ProviderId } from './constants.ts'
import { deadLetterMessagesTx, isLeasedBy, lockMessagesTx, publishMessagesTx, type DeadLetter, type Lease } from './messages-sql.ts'
import { invitationClosedReason, invitationStatesTx } from './invitation-states-sql.ts'
import { pauseForThrottleTx } from './provider-pauses-sql.ts'
import { defaultHealthPolicy } from './provider-health.ts'
import { noteProviderAnswersTx, type ProviderAnswers, type ProviderTransition } from './provider-states-sql.ts'
import { completeJobsTx, scheduleNextAttemptTx } from './settle.ts'
import { settleDeferralsTx, type Deferral } from './record-deferrals.ts'

/** What happened to one claimed message, as the worker reports it to the record step. */
export type Outcome =
  | { kind: 'published'; providerMessageId: string; durationMs: number; provider?: Sent }
  /**
   * `recipientOnly`: the provider's answer was about this recipient alone; the outage hold does not count it.
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
   * Not sent: its channel was paused while it waited for a send slot, or a send cap holds it until
   * `until` (the end of the hour); back for the later of the two, no attempt spent. `misconfigured`:
   * the provider refused us (FailureEffect `provider_misconfigured`): it is held down at once.
   */
  | { kind: 'deferred'; until?: Date; heldFor?: readonly string[]; misconfigured?: Sent }

/** Which provider an attempt went to, on which channel, and whether it was the probe of a provider held down. */
export type Sent = { id: ProviderId; probe: boolean; channel: Channel }

/**
 * What the record step decided, for logs and metrics. `transitions`: what the outage hold did with
 * the providers' answers, on the first result of the transaction that recorded them.
 */
export type Recorded = (
  | { kind: 'published'; attemptNo: number }
  /** `channelPausedUntil`: after a THROTTLED answer, the channel's pause as the database now holds it. */
  | { kind: 'retry_scheduled'; attemptNo: number; nextAttemptAt: Date; channelPausedUntil?: Date | null }
  | { kind: 'dead_lettered'; attemptNo: number | null; reason: DeadLetterReason; channelPausedUntil?: Date | null }
  | { kind: 'deferred'; nextAttemptAt: Date }
  | { kind: 'lease_lost' }
) & { transitions?: ProviderTransition[] }

/** One job attempt's outcome to record. */
export type RecordRequest = { messageId: string; lease: Lease; outcome: Outcome }

/**
 * Step 5 of delivery (the pipeline's record step, in group commits): only the job attempt that
 * still holds a message's lease may record for it. Attempt rows, state changes, ciphertext deletes,
 * next jobs and the settlement of the jobs commit together or not at all. If the batch cannot
 * commit (one job's attempt lapsed meanwhile, a deadlock), each outcome is recorded again alone, so
 * a lost lease costs only its own record; a failure is reported per request, never thrown. A
 * transient database error (a deadlock, a lock timeout: src/db/transient.ts) is first tried again
 * in a new transaction, the group and then each alone: the sends already left, and a record failed
 * back to pg-boss would send them again.
 */
export async function recordOutcomesEach(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
  logger?: Logger,
): Promise<(Recorded | Failed)[]> {
  const retried = { logger, what: 'delivery record' }
  // Publications, the common case, take one statement; anything else goes through the full path.
  const published = requests.filter((request) => request.outcome.kind === 'published')
  const others = requests.filter((request) => request.outcome.kind !== 'published')
  const [fast, full] = await Promise.all([
    batchOrEach(published, (batch) => withTransientRetry(db, () => recordPublishedBatch(db, boss, settings, batch, now), retried)),
    batchOrEach(others, (batch) => withTransientRetry(db, () => recordBatch(db, boss, settings, batch, now), retried)),
  ])
  return requests.map((request) =>
    request.outcome.kind === 'published' ? fast[published.indexOf(request)]! : full[others.indexOf(request)]!,
  )
}

/**
 * Publications in one statement inside a short transaction (BEGIN, the statement, pg-boss's
 * complete, COMMIT): lock in id order the messages still leased to these very job attempts, insert
 * their attempt rows, publish them and delete their ciphertexts; then complete exactly those jobs
 * with their `{id, retryCount}`. A message no longer leased to its attempt records nothing.
 */
async function recordPublishedBatch(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  if (new Set(requests.map((request) => request.messageId)).size !== requests.length) throw new Error('one message twice in a record batch')
  return await db.transaction(async (trx): Promise<Recorded[]> => {
    const rows = await publishLeasedMessagesTx(
      trx,
      requests.map((request) => ({
        messageId: request.messageId,
        lease: request.lease,
        providerMessageId: request.outcome.kind === 'published' ? request.outcome.providerMessageId : '',
        durationMs: request.outcome.kind === 'published' ? request.outcome.durationMs : 0,
        provider: request.outcome.kind === 'published' ? (request.outcome.provider?.id ?? null) : null,
        channel: request.outcome.kind === 'published' ? (request.outcome.provider?.channel ?? null) : null,
      })),
      now,
    )
    const locked = new Map(rows.map((row) => [row.id, row]))
    await completeJobsTx(
      trx,
      boss,
      requests.filter((request) => locked.has(request.messageId)).map((request) => request.lease),
    )
    const transitions = await noteProviderAnswersTx(
      trx,
      answersOf(
        requests.flatMap((request) => {
          const row = locked.get(request.messageId)
          return row ? [{ outcome: request.outcome, channel: row.channel }] : []
        }),
      ),
      now,
      settings.providerHealth ?? defaultHealthPolicy(),
    )
    const results = requests.map((request): Recorded => {
      const row = locked.get(request.messageId)
      return row === undefined ? { kind: 'lease_lost' } : { kind: 'published', attemptNo: row.attempt_count + 1 }
    })
    if (transitions.length > 0) results[0]!.transitions = transitions
    return results
  })
}

/**
 * What each provider answered in one record transaction, for the outage hold: a success or a
 * REJECTED proves it is there; UNAVAILABLE / INDETERMINATE count against it; THROTTLED (its pause
 * handles it), a temporary refusal of one recipient and a worker's own error say nothing about it. Attempts without a provider (recorded
 * by a release before providers were named) are left out.
 */
function answersOf(entries: readonly { outcome: Outcome; channel: Channel }[]): ProviderAnswers[] {
  const byProvider = new Map<string, ProviderAnswers>()
  for (const { outcome, channel } of entries) {
    const sent = outcome.kind === 'deferred' ? outcome.misconfigured : outcome.kind === 'dead_letter' ? undefined : outcome.provider
    if (!sent) continue
    const answers = byProvider.get(sent.id) ?? {
      provider: sent.id,
      // The provider's own channel (a phone message may have gone by SMS); the message's for an outcome without one.
      channel: sent.channel ?? channel,
      answered: 0,
      transient: 0,
      probe: false,
    }
    if (outcome.kind !== 'published' && outcome.kind !== 'failed') {
      // A deferral names a provider only when it refused our own settings.
      answers.misconfigured = true
      answers.probe ||= sent.probe
    } else if (outcome.kind === 'published' || outcome.failureClass === 'REJECTED') answers.answered += 1
    else if (TRANSIENT_FAILURES.has(outcome.failureClass) && outcome.recipientOnly !== true) {
      answers.transient += 1
      answers.probe ||= sent.probe
    }
    byProvider.set(sent.id, answers)
  }
  return [...byProvider.values()]
}

async function recordBatch(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  return await db.transaction(async (trx): Promise<Recorded[]> => {
    const rows = new Map(
      (
        await lockMessagesTx(
          trx,
          requests.map((request) => request.messageId),
        )
      ).map((row) => [row.id, row]),
    )
    const attempts: NewAttempt[] = []
    const published: string[] = []
    const deadLetters: DeadLetter[] = []
    const retries: { messageId: string; at: Date }[] = []
    const throttled = new Map<Channel, Date | null>()
    const settled: Lease[] = []
    const deferrals: Deferral[] = []
    const throttledAnswers: { index: number; channel: Channel }[] = []

    // An invitation revoked, accepted or expired while its message was out is never requeued.
    const invitations = await invitationStatesTx(
      trx,
      requests.flatMap((request) => {
        const invitationId = rows.get(request.messageId)?.invitation_id
        return invitationId && request.outcome.kind === 'failed' ? [invitationId] : []
      }),
    )
    // The channel of each attempt this transaction records, for the outage hold's answers.
    const channels = new Map<string, Channel>()
    const results = requests.map(({ messageId, lease, outcome }, index): Recorded => {
      const message = rows.get(messageId)
      if (!message || !isLeasedBy(message, lease)) return { kind: 'lease_lost' }
      rows.delete(messageId)
      channels.set(messageId, message.channel)
      settled.push(lease)
      if (outcome.kind === 'dead_letter') {
        deadLetters.push({ messageId, reason: outcome.reason, lastFailureClass: null })
        return { kind: 'dead_lettered', attemptNo: null, reason: outcome.reason }
      }
      if (outcome.kind === 'deferred') {
        // Decided below, once this transaction's own pauses are written.
        deferrals.push({ index, messageId, message, heldUntil: outcome.until, heldFor: outcome.heldFor })
        return { kind: 'deferred', nextAttemptAt: now }
      }
      // A THROTTLED answer pauses the channel it came from, which for a phone message may be SMS;
      // never one about this recipient alone (a pair rate limit), or one person could pause everyone.
      const sentOn = (outcome.kind === 'failed' || outcome.kind === 'published' ? outcome.provider?.channel : undefined) ?? message.channel
      const pauses = outcome.kind === 'failed' && outcome.failureClass === 'THROTTLED' && outcome.recipientOnly !== true
      if (pauses) throttledAnswers.push({ index, channel: sentOn })
      const attemptNo = message.attempt_count + 1
      let decided: Decision = decide(settings, attemptNo, outcome, message, now)
      const closed =
        decided.kind === 'retry_scheduled' && message.invitation_id
          ? invitationClosedReason(invitations.get(message.invitation_id), now)
          : undefined
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
        provider: outcome.provider?.id ?? null,
        channel: sentOn,
      })
      if (decided.kind === 'published') published.push(messageId)
      else if (decided.kind === 'dead_lettered')
        deadLetters.push({
          messageId,
          reason: decided.reason,
          lastFailureClass: outcome.kind === 'failed' ? outcome.failureClass : null,
          attempted: true,
        })
      else retries.push({ messageId, at: decided.nextAttemptAt })
      // One pause per channel and batch: the latest hint any answer gave, else a hint-less back-off.
      if (pauses && outcome.kind === 'failed') {
        const seen = throttled.get(sentOn) ?? null
        throttled.set(sentOn, outcome.retryAfterAt && (!seen || outcome.retryAfterAt > seen) ? outcome.retryAfterAt : seen)
      }
      return decided
    })

    await insertAttemptsTx(trx, attempts)
    await publishMessagesTx(trx, published, now)
    await deleteCiphertextsTx(trx, published)
    await deadLetterMessagesTx(trx, deadLetters, now)
    for (const { messageId, at } of retries) await scheduleNextAttemptTx(trx, boss, messageId, at, { attempted: true })
    for (const [channel, retryAfterAt] of throttled)
      await pauseForThrottleTx(trx, channel, retryAfterAt, now, settings.providerPause ?? defaultPausePolicy())
    if (deferrals.length > 0 || throttledAnswers.length > 0)
      await settleDeferralsTx(trx, boss, { deferrals, throttledAnswers, results }, now)
    const transitions = await noteProviderAnswersTx(
      trx,
      answersOf(
        requests.flatMap((request) => {
          const channel = channels.get(request.messageId)
          return channel ? [{ outcome: request.outcome, channel }] : []
        }),
      ),
      now,
      settings.providerHealth ?? defaultHealthPolicy(),
    )
    await completeJobsTx(trx, boss, settled)
    if (transitions.length > 0) results[0]!.transitions = transitions
    return results
  })
}
