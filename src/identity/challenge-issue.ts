import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { generateCode, hashCode } from '../crypto/codes.ts'
import { describeError } from '../logging/logger.ts'
import type { ChallengePurpose } from '../outbox/constants.ts'
import { logEnqueued, sealMessage } from '../outbox/enqueue.ts'
import type { Asker } from '../outbox/send-caps.ts'
import type { SealedMessage } from '../outbox/web-functions-sql.ts'
import {
  CHALLENGE_LIMITS,
  challengeExpiry,
  assertChannelAvailable,
  DESTINATION_BUDGET,
  destinationBucket,
  type ChallengeDeps,
} from './challenges.ts'
import { issueChallengeSql, openChallengeId, type ChallengeSubject, type IssueOutcome } from './challenges-sql.ts'
import { RateLimitedError } from './errors.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { tiersJson } from './rate-limits.ts'
import { INTERNAL_REQUESTER, ownerBudgetTiers, type Requester } from './requester.ts'

/** How a claim is written before a hidden issue: inserted (a new sign-up), rehearsed, or by the rehearsed issue itself. */
export type ClaimStep = 'insert' | 'rehearse' | 'none'

type IssueTarget = {
  purpose: ChallengePurpose
  identifier: Identifier
  /** Who asks, as the flow knows it (src/outbox/send-caps.ts `Asker`): the same on every path of one request, known account or not. */
  asked: Asker
  subject?: Omit<ChallengeSubject, 'purpose'>
  /** The subject's open challenge as the caller's own lookup read it (`null`: none); else `runIssue` reads it. */
  openChallengeId?: string | null
}

const REFUSALS: Readonly<Record<string, string>> = { SPR01: 'resend_too_soon', SPR02: 'too_many_resends', SPR03: 'rate_limited' }

type IssueOptions = { candidatePasswordHash?: string; now: Date; countDestination: boolean; claim: ClaimStep; requester?: Requester }

/**
 * A new code, hashed under the new challenge's id and under the open one's (so a resend needs no
 * second trip; the key never leaves this process), and its sealed message. The code itself is
 * wiped before this returns.
 */
async function sealNewCode(
  deps: ChallengeDeps,
  target: IssueTarget,
  ids: { newChallengeId: string; openId: string | undefined },
  expiresAt: Date,
): Promise<{ codeHashes: [Buffer, Buffer]; message: SealedMessage }> {
  const code = generateCode()
  try {
    const codeHashes: [Buffer, Buffer] = [
      hashCode(deps.codeHashKey, ids.newChallengeId, code),
      hashCode(deps.codeHashKey, ids.openId ?? uuidv7(), code),
    ]
    const message = await sealMessage(
      deps,
      {
        purpose: target.purpose,
        channel: assertChannelAvailable(deps, target.identifier),
        destination: target.identifier.value,
        locale: deps.locale ?? 'en',
        expiresAt,
        asked: target.asked,
      },
      code,
    )
    return { codeHashes, message }
  } finally {
    code.fill(0)
  }
}

/** The destination's budget as the call names it: its bucket keys, and for a hidden issue (anonymous routes) the requester's tiers instead (migration 20261202000400). */
function destinationBudget(deps: ChallengeDeps, mode: 'visible' | 'hidden', target: IssueTarget, requester: Requester | undefined) {
  const tiers = () =>
    ownerBudgetTiers(
      deps,
      `destination:${target.identifier.kind}`,
      canonicalDestination(target.identifier),
      DESTINATION_BUDGET,
      requester ?? INTERNAL_REQUESTER,
      target.subject?.identityId,
    )
  return {
    destination_buckets: destinationBucket(deps, target.identifier).map((key) => key.toString('hex')),
    ...(mode === 'hidden' ? { destination_budgets: tiersJson(tiers()) } : {}),
    destination_max: CHALLENGE_LIMITS.codesPerDestinationPerHour,
    destination_window_seconds: 3_600,
  }
}

/**
 * Builds the one call of `identity.issue_challenge` (migration 20261201000800) and makes it: the
 * code's hashes, the sealed message and its job as `boss.send` would write it, the destination's
 * bucket keys and throw-away ids for the rehearsals. Every path computes all of them, so the work
 * here does not depend on what the database will find.
 */
async function runIssue(
  trx: Knex | Knex.Transaction,
  deps: ChallengeDeps,
  mode: 'visible' | 'hidden',
  target: IssueTarget,
  options: IssueOptions,
): Promise<IssueOutcome> {
  const { now } = options
  const expiresAt = challengeExpiry(deps, now)
  const throwaway = { identityId: uuidv7(), loginIdentifierId: uuidv7() }
  const openId =
    target.openChallengeId !== undefined
      ? (target.openChallengeId ?? undefined)
      : await openChallengeId(trx, { purpose: target.purpose, ...(target.subject ?? throwaway) }, now)
  const newChallengeId = uuidv7()
  const { codeHashes, message } = await sealNewCode(deps, target, { newChallengeId, openId }, expiresAt)
  const params = {
    mode,
    claim: options.claim,
    purpose: target.purpose,
    identity_id: target.subject?.identityId ?? null,
    login_identifier_id: target.subject?.loginIdentifierId ?? null,
    throwaway_identity_id: throwaway.identityId,
    throwaway_login_identifier_id: throwaway.loginIdentifierId,
    identifier_kind: target.identifier.kind,
    identifier_value: target.identifier.value,
    now: now.toISOString(),
    expires_at: expiresAt.toISOString(),
    count_destination: options.countDestination,
    ...destinationBudget(deps, mode, target, options.requester),
    resend_interval_seconds: CHALLENGE_LIMITS.resendIntervalSeconds,
    max_resends: CHALLENGE_LIMITS.maxResends,
    new_challenge_id: newChallengeId,
    new_code_hash: codeHashes[0].toString('hex'),
    open_challenge_id: openId ?? null,
    open_code_hash: codeHashes[1].toString('hex'),
    candidate_password_hash: options.candidatePasswordHash ?? null,
    message,
  }
  try {
    const outcome = await issueChallengeSql(trx, params)
    // One line per request: the real message's, or — with no subject — the rehearsed one's, so the
    // log's lines do not tell an unknown identifier from a known one (a refusal logs its reason instead).
    if (outcome.outcome === 'issued' || outcome.outcome === 'no_subject') logEnqueued(deps, message)
    return outcome
  } catch (error) {
    const refusal = REFUSALS[(error as { code?: string }).code ?? '']
    if (mode === 'visible' && refusal) throw new RateLimitedError(Number((error as { detail?: string }).detail), refusal)
    throw error
  }
}

/**
 * Issues a challenge and hides any failure of it behind the caller's ordinary answer: used where
 * the failure itself would reveal that an account exists. One call of `identity.issue_challenge`
 * in `hidden` mode: the claim (`claim`: inserted for a new sign-up, else rehearsed), then the
 * destination's budget, spent whether or not there is a `subject` (so no later request can tell a
 * known address from an unknown one), then the issue, or — without a subject, over the budget or
 * refused (a resend too soon) — its rehearsal: every path writes the same rows, the rehearsed ones
 * in a subtransaction rolled back, so the commit still flushes their WAL. Timing is then equal
 * under any load, not only while an answer floor hides it. Logged by error name and code. A
 * transient database error (src/db/transient.ts) is not hidden: it says nothing about the account,
 * and a 202 must mean committed, so it reaches the caller, which tries again or answers 503.
 */
export async function issueHidden(
  trx: Knex | Knex.Transaction,
  deps: ChallengeDeps,
  flow: string,
  target: IssueTarget,
  options: { candidatePasswordHash?: string; now: Date; claim: ClaimStep; requester?: Requester },
): Promise<void> {
  reportHidden(deps, flow, await runIssue(trx, deps, 'hidden', target, { ...options, countDestination: true }))
}

function reportHidden(deps: Pick<ChallengeDeps, 'logger'>, flow: string, outcome: IssueOutcome): void {
  if (outcome.outcome === 'issued' || outcome.outcome === 'no_subject') {
    if (outcome.failure) deps.logger.warn('rehearsal failed', { errorName: 'DatabaseError', errorCode: outcome.failure })
    return
  }
  const reason =
    outcome.outcome === 'failed'
      ? { errorName: 'DatabaseError', errorCode: outcome.failure ?? 'unknown' }
      : describeError(new RateLimitedError(outcome.retry_after_seconds ?? 1, outcome.outcome))
  deps.logger.warn(`${flow} not enqueued`, reason)
}

/**
 * Opens a challenge for the subject, or, when one is open, resends it: a new code replaces the
 * old (which stops verifying), every older unsent message is dead-lettered `superseded_by_resend`,
 * and the new message is enqueued — all in the caller's transaction, in one call of
 * `identity.issue_challenge`. Refused with RateLimitedError for a resend within 30 s, past five
 * resends, or (with `countDestination`) past five codes an hour to the destination.
 * Concurrent requests for one subject queue on an advisory lock, so only one resend wins each 30 s window.
 */
export async function issueChallengeTx(
  trx: Knex.Transaction,
  deps: ChallengeDeps,
  subject: ChallengeSubject & { identifier: Identifier; asked: Asker },
  options: { candidatePasswordHash?: string; now?: Date; countDestination?: boolean } = {},
): Promise<{ challengeId: string; expiresAt: Date }> {
  const now = options.now ?? deps.clock()
  const outcome = await runIssue(
    trx,
    deps,
    'visible',
    { purpose: subject.purpose, identifier: subject.identifier, asked: subject.asked, subject },
    { candidatePasswordHash: options.candidatePasswordHash, now, countDestination: options.countDestination ?? true, claim: 'none' },
  )
  return { challengeId: outcome.challenge_id!, expiresAt: challengeExpiry(deps, now) }
}
