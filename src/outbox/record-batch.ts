import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { insertAttemptsTx, type NewAttempt } from './attempts-sql.ts'
import { deleteCiphertextsTx } from './ciphertexts-sql.ts'
import type { Channel } from './constants.ts'
import { invitationClosedReason, invitationStatesTx, type InvitationState } from './invitation-states-sql.ts'
import {
  deadLetterMessagesTx,
  isLeasedBy,
  lockMessagesTx,
  publishMessagesTx,
  type DeadLetter,
  type Lease,
  type MessageRow,
} from './messages-sql.ts'
import type { Outcome, Recorded, RecordRequest } from './outcomes.ts'
import { answersOf } from './provider-answers.ts'
import { defaultHealthPolicy } from './provider-health.ts'
import { defaultPausePolicy } from './provider-pause.ts'
import { pauseForThrottleTx } from './provider-pauses-sql.ts'
import { noteProviderAnswersTx } from './provider-states-sql.ts'
import { runningPausesTx, settleDeferralsTx, type Deferral } from './record-deferrals.ts'
import { decide, type Decision, type RetrySettings } from './retry-policy.ts'
import { completeJobsTx, scheduleNextAttemptTx } from './settle.ts'

/** What one record transaction writes, gathered message by message before any statement. */
type Plan = {
  attempts: NewAttempt[]
  published: string[]
  deadLetters: DeadLetter[]
  retries: { messageId: string; at: Date }[]
  /** One pause per provider and batch: the latest hint any of its THROTTLED answers gave. */
  throttles: Map<string, { channel: Channel; retryAfterAt: Date | null }>
  /** The results of THROTTLED answers, which learn their provider's pause once it is written. */
  throttledAnswers: { index: number; provider: string }[]
  deferrals: Deferral[]
  settled: Lease[]
  /** The channel of each message this transaction records, for the breaker's answers. */
  channels: Map<string, Channel>
}

const emptyPlan = (): Plan => ({
  attempts: [],
  published: [],
  deadLetters: [],
  retries: [],
  throttles: new Map(),
  throttledAnswers: [],
  deferrals: [],
  settled: [],
  channels: new Map(),
})

/**
 * The full record path for a batch of outcomes, in one transaction: lock the messages; for each
 * still leased to its job attempt decide (publish, retry, dead-letter, defer); write the attempts,
 * state changes, next jobs and the providers' pauses; settle the deferrals; tell the breaker what
 * the providers answered; complete the jobs. A message no longer leased records nothing.
 */
export async function recordBatchTx(
  trx: Knex.Transaction,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  const rows = new Map(
    (
      await lockMessagesTx(
        trx,
        requests.map((request) => request.messageId),
      )
    ).map((row) => [row.id, row]),
  )
  // An invitation revoked, accepted or expired while its message was out is never requeued.
  const invitations = await invitationStatesTx(
    trx,
    requests.flatMap((request) => {
      const invitationId = rows.get(request.messageId)?.invitation_id
      return invitationId && request.outcome.kind === 'failed' ? [invitationId] : []
    }),
  )
  const plan = emptyPlan()
  const results = requests.map((request, index) =>
    planOne(plan, settings, { request, index, row: rows.get(request.messageId) }, invitations, now),
  )
  await writePlanTx(trx, boss, settings, plan, now)
  if (plan.throttledAnswers.length > 0) {
    const pauses = await runningPausesTx(trx, now)
    for (const { index, provider } of plan.throttledAnswers) {
      const result = results[index]!
      if (result.kind === 'retry_scheduled' || result.kind === 'dead_lettered') result.pausedUntil = pauses.providers.get(provider) ?? null
    }
  }
  for (const [index, fate] of await settleDeferralsTx(trx, boss, plan.deferrals, now)) results[index] = fate
  const answers = answersOf(
    requests.flatMap((request) =>
      plan.channels.has(request.messageId) ? [{ outcome: request.outcome, channel: plan.channels.get(request.messageId)! }] : [],
    ),
  )
  const transitions = await noteProviderAnswersTx(trx, answers, now, settings.providerHealth ?? defaultHealthPolicy())
  await completeJobsTx(trx, boss, plan.settled)
  if (transitions.length > 0) results[0]!.transitions = transitions
  return results
}

/** One outcome's decision, added to the plan; rows locked and one plan per transaction. */
function planOne(
  plan: Plan,
  settings: RetrySettings,
  { request, index, row }: { request: RecordRequest; index: number; row: MessageRow | undefined },
  invitations: ReadonlyMap<string, InvitationState>,
  now: Date,
): Recorded {
  const { messageId, lease, outcome } = request
  // A second request for a message already recorded in this batch finds it taken.
  if (!row || !isLeasedBy(row, lease) || plan.channels.has(messageId)) return { kind: 'lease_lost' }
  plan.channels.set(messageId, row.channel)
  plan.settled.push(lease)
  if (outcome.kind === 'dead_letter') {
    plan.deadLetters.push({ messageId, reason: outcome.reason, lastFailureClass: null })
    return { kind: 'dead_lettered', attemptNo: null, reason: outcome.reason }
  }
  if (outcome.kind === 'deferred') {
    // Decided once this transaction's own pauses are written (settleDeferralsTx).
    const { until: heldUntil, heldFor, pausedProvider } = outcome
    plan.deferrals.push({ index, messageId, message: row, heldUntil, heldFor, pausedProvider })
    return { kind: 'deferred', nextAttemptAt: now }
  }
  return planAttempt(plan, settings, { request: { messageId, outcome }, index, row }, invitations, now)
}

/** A message that was sent: its attempt row, and publish, retry or dead-letter it. */
function planAttempt(
  plan: Plan,
  settings: RetrySettings,
  {
    request,
    index,
    row,
  }: { request: { messageId: string; outcome: Extract<Outcome, { kind: 'published' | 'failed' }> }; index: number; row: MessageRow },
  invitations: ReadonlyMap<string, InvitationState>,
  now: Date,
): Recorded {
  const { messageId, outcome } = request
  // A THROTTLED answer pauses the provider it came from, never one about this recipient alone
  // (a pair rate limit), or one person could pause everyone.
  const sentOn = outcome.provider?.channel ?? row.channel
  const attemptNo = row.attempt_count + 1
  let decided: Decision = decide(settings, attemptNo, outcome, row, now)
  const closed =
    decided.kind === 'retry_scheduled' && row.invitation_id ? invitationClosedReason(invitations.get(row.invitation_id), now) : undefined
  if (closed) decided = { kind: 'dead_lettered', attemptNo, reason: closed }
  plan.attempts.push({
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
    ...(outcome.kind === 'failed' && outcome.recipientOnly ? { recipientOnly: true } : {}),
  })
  if (decided.kind === 'published') plan.published.push(messageId)
  else if (decided.kind === 'dead_lettered')
    plan.deadLetters.push({
      messageId,
      reason: decided.reason,
      lastFailureClass: outcome.kind === 'failed' ? outcome.failureClass : null,
      attempted: true,
    })
  else plan.retries.push({ messageId, at: decided.nextAttemptAt })
  if (outcome.kind === 'failed' && outcome.failureClass === 'THROTTLED' && outcome.recipientOnly !== true && outcome.provider) {
    const provider = outcome.provider.id
    plan.throttledAnswers.push({ index, provider })
    const seen = plan.throttles.get(provider)?.retryAfterAt ?? null
    const latest = outcome.retryAfterAt && (!seen || outcome.retryAfterAt > seen) ? outcome.retryAfterAt : seen
    plan.throttles.set(provider, { channel: sentOn, retryAfterAt: latest })
  }
  return decided
}

/** The plan's statements, in the order the invariants need (attempts before the states they count). */
async function writePlanTx(trx: Knex.Transaction, boss: PgBoss, settings: RetrySettings, plan: Plan, now: Date): Promise<void> {
  await insertAttemptsTx(trx, plan.attempts)
  await publishMessagesTx(trx, plan.published, now)
  await deleteCiphertextsTx(trx, plan.published)
  await deadLetterMessagesTx(trx, plan.deadLetters, now)
  for (const { messageId, at } of plan.retries) await scheduleNextAttemptTx(trx, boss, messageId, at, { attempted: true })
  for (const [provider, { channel, retryAfterAt }] of plan.throttles)
    await pauseForThrottleTx(trx, { provider, channel }, retryAfterAt, now, settings.providerPause ?? defaultPausePolicy())
}
