import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { generateCode, hashCode, verifyCode } from '../crypto/codes.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import type { ChallengePurpose, Channel } from '../outbox/constants.ts'
import { logEnqueued, sealMessage, type EnqueueDeps } from '../outbox/enqueue.ts'
import { deadLetterChallengeMessagesTx, type SealedMessage } from '../outbox/web-functions-sql.ts'
import {
  consumeChallengeTx,
  issueChallengeSqlTx,
  lockOpenChallengeTx,
  openChallengeIdTx,
  spendAttemptTx,
  type ChallengeRow,
  type ChallengeSubject,
  type IssueOutcome,
} from './challenges-sql.ts'
import { ChannelUnavailableError, RateLimitedError } from './errors.ts'
import { canonicalDestination, channelFor, type Identifier } from './identifiers.ts'
import {
  budget,
  clearBucketTx,
  hitRateLimitTx,
  spendTiersTx,
  tiersJson,
  tiersWaitTx,
  type Limit,
  type OwnerBudget,
  type Tier,
} from './rate-limits.ts'
import { INTERNAL_REQUESTER, ownerBudgetTiers, type Requester } from './requester.ts'
import { bucketKeys } from './secrets.ts'

/** What the challenge use cases need; the web builds it once from configuration. */
export type ChallengeDeps = EnqueueDeps & {
  /** CODE_HASH_KEYS' current key: new code hashes and rate-limit hits are written under it. */
  codeHashKey: Buffer
  /** Every CODE_HASH_KEYS key, current first: codes and budgets are checked under all of them. */
  codeHashKeys?: readonly Buffer[]
  challengeTtlSeconds: number
  clock: () => Date
  logger: Logger
  /** Channels the worker fleet can deliver on (src/outbox/channel-directory.ts: what the workers registered). */
  channels: { has(channel: Channel): boolean }
  /** The request's locale (src/http/locale.ts), stored on the message for its template; else `en`. */
  locale?: string
}

/**
 * Resends: one per 30 s, five per challenge. Codes: five per destination (canonical mailbox) an
 * hour. Wrong codes: fifteen a day per identity and purpose, across all its challenges, so guessing
 * is bounded per account and not only per challenge.
 */
export const CHALLENGE_LIMITS = Object.freeze({
  resendIntervalSeconds: 30,
  maxResends: 5,
  codesPerDestinationPerHour: 5,
  wrongCodesPerIdentityPerDay: 15,
})
const WRONG_CODES: Limit = { max: CHALLENGE_LIMITS.wrongCodesPerIdentityPerDay, windowSeconds: 86_400 }

/**
 * Codes to one destination (canonical mailbox) an hour on the anonymous routes (sign-up,
 * recovery): five from one client network, fifteen from all of them, and five more from a client
 * that signed in as the destination's owner before, whatever strangers spent.
 */
export const DESTINATION_BUDGET: OwnerBudget = Object.freeze({
  perClient: { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
  ceiling: { max: 3 * CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
  perDevice: { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
})

/**
 * Wrong codes a day on the anonymous routes (recovery, sign-up confirmation): five from one client
 * network, fifteen from all of them (the account's bound on guessing), and fifteen of its own for
 * a client that signed in as the account before.
 */
export const WRONG_CODE_BUDGET: OwnerBudget = Object.freeze({
  perClient: { max: 5, windowSeconds: 86_400 },
  ceiling: WRONG_CODES,
  perDevice: WRONG_CODES,
})

/** When a challenge issued at `now` stops verifying. */
export function challengeExpiry(deps: Pick<ChallengeDeps, 'challengeTtlSeconds'>, now: Date): Date {
  return new Date(now.getTime() + deps.challengeTtlSeconds * 1000)
}

/** A phone number without WhatsApp settings is refused up front, never enqueued. */
export function assertChannelAvailable(deps: Pick<ChallengeDeps, 'channels'>, identifier: Identifier): void {
  if (!deps.channels.has(channelFor(identifier))) throw new ChannelUnavailableError()
}

/** Counts one request of a signed-in identity against an hourly allowance (pumping from one session). */
export async function limitIdentityTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  action: string,
  identityId: string,
  perHour: number,
  now: Date,
): Promise<void> {
  await hitRateLimitTx(
    trx,
    bucketKeys(deps, `identity:${action}`, identityId),
    { max: perHour, windowSeconds: 3_600 },
    now,
    'identity_rate_limited',
  )
}

/** How a claim is written before a hidden issue: inserted (a new sign-up), rehearsed, or by the rehearsed issue itself. */
export type ClaimStep = 'insert' | 'rehearse' | 'none'

type IssueTarget = {
  purpose: ChallengePurpose
  identifier: Identifier
  subject?: Omit<ChallengeSubject, 'purpose'>
  /** The subject's open challenge as the caller's own lookup read it (`null`: none); else `issueTx` reads it. */
  openChallengeId?: string | null
}

const REFUSALS: Readonly<Record<string, string>> = { SPR01: 'resend_too_soon', SPR02: 'too_many_resends', SPR03: 'rate_limited' }

/**
 * Builds the one call of `identity.issue_challenge` (migration 20261201000800) and makes it: the
 * code, its hashes (under the new challenge's id and under the open one's, so a resend needs no
 * second trip; the key never leaves this process), the sealed message and its job as `boss.send`
 * would write it, the destination's bucket keys and throw-away ids for the rehearsals. Every path computes
 * all of them, so the work here does not depend on what the database will find.
 */
async function issueTx(
  trx: Knex | Knex.Transaction,
  deps: ChallengeDeps,
  mode: 'visible' | 'hidden',
  target: IssueTarget,
  options: { candidatePasswordHash?: string; now: Date; countDestination: boolean; claim: ClaimStep; requester?: Requester },
): Promise<IssueOutcome> {
  const { now } = options
  const expiresAt = challengeExpiry(deps, now)
  const throwaway = { identityId: uuidv7(), loginIdentifierId: uuidv7() }
  const openId =
    target.openChallengeId !== undefined
      ? (target.openChallengeId ?? undefined)
      : await openChallengeIdTx(trx, { purpose: target.purpose, ...(target.subject ?? throwaway) }, now)
  const newChallengeId = uuidv7()
  const code = generateCode()
  let codeHashes: [Buffer, Buffer]
  let message: SealedMessage
  try {
    codeHashes = [hashCode(deps.codeHashKey, newChallengeId, code), hashCode(deps.codeHashKey, openId ?? uuidv7(), code)]
    message = await sealMessage(
      deps,
      {
        purpose: target.purpose,
        channel: channelFor(target.identifier),
        destination: target.identifier.value,
        locale: deps.locale ?? 'en',
        expiresAt,
      },
      code,
    )
  } finally {
    code.fill(0)
  }
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
    destination_buckets: destinationBucket(deps, target.identifier).map((key) => key.toString('hex')),
    // Hidden issues (anonymous routes) spend the requester's tiers instead (migration 20261202000400).
    ...(mode === 'hidden'
      ? {
          destination_budgets: tiersJson(
            ownerBudgetTiers(
              deps,
              `destination:${target.identifier.kind}`,
              canonicalDestination(target.identifier),
              DESTINATION_BUDGET,
              options.requester ?? INTERNAL_REQUESTER,
              target.subject?.identityId,
            ),
          ),
        }
      : {}),
    destination_max: CHALLENGE_LIMITS.codesPerDestinationPerHour,
    destination_window_seconds: 3_600,
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
    const outcome = await issueChallengeSqlTx(trx, params)
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
export async function issueHiddenTx(
  trx: Knex | Knex.Transaction,
  deps: ChallengeDeps,
  flow: string,
  target: IssueTarget,
  options: { candidatePasswordHash?: string; now: Date; claim: ClaimStep; requester?: Requester },
): Promise<void> {
  reportHidden(deps, flow, await issueTx(trx, deps, 'hidden', target, { ...options, countDestination: true }))
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
 * The destination's bucket: the canonical mailbox, so `+tag` variants share it. Invitations spend
 * it too (src/organization/invitations.ts), under DESTINATION_BUDGET's ceiling.
 */
export const destinationBucket = (deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>, identifier: Identifier) =>
  bucketKeys(deps, `destination:${identifier.kind}`, canonicalDestination(identifier))

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
  subject: ChallengeSubject & { identifier: Identifier },
  options: { candidatePasswordHash?: string; now?: Date; countDestination?: boolean } = {},
): Promise<{ challengeId: string; expiresAt: Date }> {
  const now = options.now ?? deps.clock()
  const outcome = await issueTx(
    trx,
    deps,
    'visible',
    { purpose: subject.purpose, identifier: subject.identifier, subject },
    { candidatePasswordHash: options.candidatePasswordHash, now, countDestination: options.countDestination ?? true, claim: 'none' },
  )
  return { challengeId: outcome.challenge_id!, expiresAt: challengeExpiry(deps, now) }
}

/** What checking a code decided: the consumed challenge, or a refusal (with a wait when the identity's wrong-code budget is spent). */
export type CodeCheck = { kind: 'verified'; challenge: ChallengeRow } | { kind: 'refused'; budgetRetryAfterSeconds?: number }

const wrongCodeBucket = (deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>, purpose: ChallengePurpose, owner: string) =>
  bucketKeys(deps, `wrong-codes:${purpose}`, owner)

/**
 * The wrong-code budget a guess spends: on the anonymous routes (a `requester`) the requester's
 * tiers of the owner's budget, so a stranger's guesses do not lock the owner's client out; on the
 * signed-in routes the identity's own single budget (only a session of the identity can guess there).
 */
function wrongCodeTiers(
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  purpose: ChallengePurpose,
  owner: string,
  requester: Requester | undefined,
  identityId: string | undefined,
): Tier[] {
  if (!requester) return [{ bucket: wrongCodeBucket(deps, purpose, owner), limit: WRONG_CODES }]
  return ownerBudgetTiers(deps, `wrong-codes:${purpose}`, owner, WRONG_CODE_BUDGET, requester, identityId)
}

/**
 * Checks a code against the subject's open challenge. Refused outright while the identity's
 * wrong-code budget for this purpose (or the `budgetOwner`'s) is spent: no code verifies then, not
 * even the right one. Only guesses at a code that was sent spend it.
 * Right (and `accept`ed, e.g. the sign-up password matches): the challenge is consumed and its
 * unsent messages dead-lettered `challenge_consumed`. Wrong: one attempt and one unit of the
 * budget are spent; the last attempt kills the challenge and dead-letters its unsent messages too.
 * The caller commits either way, so a wrong guess is counted, and only then refuses.
 */
export async function checkCodeTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys' | 'clock'>,
  subject: ChallengeSubject,
  code: string,
  options: { accept?: (challenge: ChallengeRow) => boolean; budgetOwner?: string; requester?: Requester } = {},
): Promise<CodeCheck> {
  const now = deps.clock()
  const tiers = wrongCodeTiers(
    deps,
    subject.purpose,
    options.budgetOwner ?? `identity:${subject.identityId}`,
    options.requester,
    subject.identityId,
  )
  const budgetRetryAfterSeconds = await tiersWaitTx(trx, tiers, now)
  if (budgetRetryAfterSeconds !== undefined) return { kind: 'refused', budgetRetryAfterSeconds }
  const open = await lockOpenChallengeTx(trx, subject, now)
  if (!open) {
    // No code was sent to guess: a stranger's wrong codes must not lock the owner out, so they
    // spend a bucket nobody checks (the same write as a real guess, for the same commit).
    await budget.spendTx(trx, wrongCodeBucket(deps, subject.purpose, `no-challenge:${subject.loginIdentifierId}`), now)
    return { kind: 'refused' }
  }
  if (
    !/^\d{6}$/.test(code) ||
    !verifyCode(deps.codeHashKeys ?? deps.codeHashKey, open.id, code, open.code_hash) ||
    !(options.accept?.(open) ?? true)
  ) {
    await spendTiersTx(trx, tiers, now)
    if ((await spendAttemptTx(trx, open.id)) <= 0) await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
    return { kind: 'refused' }
  }
  await consumeChallengeTx(trx, open.id, now)
  await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
  return { kind: 'verified', challenge: open }
}

/**
 * Forgives the wrong codes the identity's sessions spent on the signed-in routes (step-up, adding a
 * sign-in method). Called when a recovery has just proved a verified identifier's mailbox — what a
 * step-up proves — and revoked every session: a thief's stolen session that spent the day's guesses
 * is gone, and must not keep the owner from stepping up for the rest of the day.
 */
export async function forgiveSignedInGuessesTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  identityId: string,
): Promise<void> {
  for (const purpose of ['step_up', 'add_sign_in_method'] as const)
    await clearBucketTx(trx, wrongCodeBucket(deps, purpose, `identity:${identityId}`))
}

/**
 * A code presented for an identifier nobody can be checked against: spends a unit of a budget kept
 * for the identifier itself, so the refusal writes and commits what a real wrong guess does.
 */
export async function refuseUnknownCodeTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys' | 'clock'>,
  purpose: ChallengePurpose,
  identifier: Identifier,
  requester?: Requester,
): Promise<void> {
  const now = deps.clock()
  const tiers = wrongCodeTiers(deps, purpose, `identifier:${identifier.kind}:${canonicalDestination(identifier)}`, requester, undefined)
  if ((await tiersWaitTx(trx, tiers, now)) === undefined) await spendTiersTx(trx, tiers, now)
}
