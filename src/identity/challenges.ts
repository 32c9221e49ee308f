import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { generateCode, hashCode, verifyCode } from '../crypto/codes.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import type { ChallengePurpose, Channel } from '../outbox/constants.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import type { AlongsideSql } from '../outbox/messages-sql.ts'
import { deadLetterChallengeMessagesTx } from '../outbox/web-functions-sql.ts'
import {
  consumeChallengeTx,
  insertChallengeSql,
  lockOpenChallengeTx,
  rotateChallengeCodeSql,
  spendAttemptTx,
  type ChallengeRow,
  type ChallengeSubject,
} from './challenges-sql.ts'
import { ChannelUnavailableError, RateLimitedError } from './errors.ts'
import { insertIdentityWithClaimTx } from './identities-sql.ts'
import { canonicalDestination, channelFor, type Identifier } from './identifiers.ts'
import { budget, hitRateLimitTx, type Limit } from './rate-limits.ts'
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
  /** Channels this deployment can deliver on (WhatsApp only with Wasender settings). */
  channels: ReadonlySet<Channel>
  /** A step run after the enqueue, inside the same transaction (tests force failures with it). */
  afterEnqueueTx?: (trx: Knex.Transaction) => Promise<void>
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

const REHEARSAL = Symbol('rehearsal')

/** Runs `work` in a savepoint that is always rolled back; its writes still cost their WAL at the caller's commit. */
async function rehearseTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'logger'>,
  work: (savepoint: Knex.Transaction) => Promise<unknown>,
): Promise<void> {
  await trx
    .transaction(async (savepoint) => {
      await work(savepoint)
      // A private sentinel, not an Error: it only rolls the savepoint back and is recognised just below.
      // eslint-disable-next-line @typescript-eslint/only-throw-error
      throw REHEARSAL
    })
    .catch((error: unknown) => {
      if (error !== REHEARSAL && !(error instanceof RateLimitedError)) deps.logger.warn('rehearsal failed', describeError(error))
    })
}

/** A throw-away pending identity claiming the identifier, inside the caller's savepoint. */
async function insertThrowAwayClaimTx(
  trx: Knex.Transaction,
  identifier: Identifier,
  now: Date,
): Promise<{ identityId: string; loginIdentifierId: string }> {
  const ids = { identityId: uuidv7(), loginIdentifierId: uuidv7() }
  await insertIdentityWithClaimTx(trx, ids, 'pending', identifier, null, now)
  return ids
}

/**
 * Equal work by construction where an answer must not tell whether an account exists: every path
 * of sign-up and password recovery writes the rows of a new claim (real or rehearsed) and of an
 * issued challenge (real or rehearsed): identity, claim, challenge, the destination count, the
 * sealed message and its pg-boss job. Rehearsed rows are written in a savepoint that is rolled
 * back, so the caller's commit still flushes their WAL. Timing is then equal under any load, not
 * only while an answer floor hides it.
 */
export const rehearse = {
  /** The two rows of a new claim, rolled back: for the paths that have no claim to insert. */
  claimTx: (trx: Knex.Transaction, deps: Pick<ChallengeDeps, 'logger'>, identifier: Identifier, now: Date) =>
    rehearseTx(trx, deps, (savepoint) => insertThrowAwayClaimTx(savepoint, identifier, now)),
  /** A new claim and an issued challenge, rolled back: for the paths that issue nothing. */
  issueTx: (trx: Knex.Transaction, deps: ChallengeDeps, purpose: ChallengePurpose, identifier: Identifier, now: Date) =>
    rehearseTx(trx, deps, async (savepoint) => {
      const ids = await insertThrowAwayClaimTx(savepoint, identifier, now)
      // The destination was counted (or refused) by the caller, in its own transaction, as for a real issue.
      await issueChallengeTx(
        savepoint,
        { ...deps, afterEnqueueTx: undefined },
        { purpose, ...ids, identifier },
        { now, countDestination: false },
      )
    }),
}

/**
 * Issues a challenge in a savepoint and hides any failure of it behind the caller's ordinary
 * answer: used where the failure itself would reveal that an account exists. The destination's
 * budget is spent first, in the caller's transaction, whether or not there is a `subject` to issue
 * for, so no later request (a probe through a signed-in route that shows the budget) can tell a
 * known address from an unknown one. Without a subject, over the budget, or refused (a resend too
 * soon), the issue is rehearsed instead, so every path costs what a successful one costs. Logged
 * by error name and code.
 */
export async function issueHiddenTx(
  trx: Knex.Transaction,
  deps: ChallengeDeps,
  flow: string,
  target: { purpose: ChallengePurpose; identifier: Identifier; subject?: Omit<ChallengeSubject, 'purpose'> },
  options: { candidatePasswordHash?: string; now: Date },
): Promise<void> {
  const counted = await enforceDestinationLimitTx(trx, deps, target.identifier, options.now).then(
    () => true,
    (error: unknown) => {
      if (!(error instanceof RateLimitedError)) throw error
      deps.logger.warn(`${flow} not enqueued`, describeError(error))
      return false
    },
  )
  if (counted && target.subject) {
    try {
      const subject = { purpose: target.purpose, ...target.subject, identifier: target.identifier }
      await trx.transaction((savepoint) => issueChallengeTx(savepoint, deps, subject, { ...options, countDestination: false }))
      return
    } catch (error) {
      deps.logger.warn(`${flow} not enqueued`, describeError(error))
    }
  }
  await rehearse.issueTx(trx, deps, target.purpose, target.identifier, options.now)
}

/**
 * Counts a code about to be sent to this destination, across every web process; the 6th in an
 * hour is refused. The bucket is the canonical mailbox, so `+tag` variants share it.
 */
async function enforceDestinationLimitTx(trx: Knex.Transaction, deps: ChallengeDeps, identifier: Identifier, now: Date): Promise<void> {
  await hitRateLimitTx(
    trx,
    bucketKeys(deps, `destination:${identifier.kind}`, canonicalDestination(identifier)),
    { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
    now,
  )
}

/**
 * Opens a challenge for the subject, or, when one is open, resends it: a new code replaces the
 * old (which stops verifying), every older unsent message is dead-lettered `superseded_by_resend`,
 * and the new message is enqueued — all in the caller's transaction. Refused with RateLimitedError
 * for a resend within 30 s, past five resends, or past five codes an hour to the destination.
 * Concurrent requests for one subject queue on an advisory lock, so only one resend wins each 30 s window.
 */
export async function issueChallengeTx(
  trx: Knex.Transaction,
  deps: ChallengeDeps,
  subject: ChallengeSubject & { identifier: Identifier },
  options: { candidatePasswordHash?: string; now?: Date; countDestination?: boolean } = {},
): Promise<{ challengeId: string; expiresAt: Date }> {
  const now = options.now ?? deps.clock()
  const expiresAt = challengeExpiry(deps, now)
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [
    `challenge:${subject.purpose}:${subject.identityId}:${subject.loginIdentifierId}`,
  ])
  const open = await lockOpenChallengeTx(trx, subject, now)
  const code = generateCode()
  try {
    let challengeId: string
    // The challenge's write goes in the message's statement (one round trip fewer), after the count.
    let challengeWrite: AlongsideSql
    if (open) {
      const waitMs = open.last_sent_at.getTime() + CHALLENGE_LIMITS.resendIntervalSeconds * 1000 - now.getTime()
      if (waitMs > 0) throw new RateLimitedError(waitMs / 1000, 'resend_too_soon')
      if (open.resend_count >= CHALLENGE_LIMITS.maxResends)
        throw new RateLimitedError((open.expires_at.getTime() - now.getTime()) / 1000, 'too_many_resends')
      challengeId = open.id
      await deadLetterChallengeMessagesTx(trx, challengeId, 'superseded_by_resend', now)
      challengeWrite = rotateChallengeCodeSql(challengeId, {
        codeHash: hashCode(deps.codeHashKey, challengeId, code),
        expiresAt,
        now,
        candidatePasswordHash: options.candidatePasswordHash,
      })
    } else {
      challengeId = uuidv7()
      challengeWrite = insertChallengeSql({
        id: challengeId,
        purpose: subject.purpose,
        identityId: subject.identityId,
        loginIdentifierId: subject.loginIdentifierId,
        codeHash: hashCode(deps.codeHashKey, challengeId, code),
        expiresAt,
        now,
        candidatePasswordHash: options.candidatePasswordHash,
      })
    }
    if (options.countDestination ?? true) await enforceDestinationLimitTx(trx, deps, subject.identifier, now)
    await enqueueSecurityMessageTx(
      trx,
      deps,
      {
        purpose: subject.purpose,
        challengeId,
        channel: channelFor(subject.identifier),
        destination: subject.identifier.value,
        locale: deps.locale ?? 'en',
        expiresAt,
      },
      code,
      challengeWrite,
    )
    await deps.afterEnqueueTx?.(trx)
    return { challengeId, expiresAt }
  } finally {
    code.fill(0)
  }
}

/** What checking a code decided: the consumed challenge, or a refusal (with a wait when the identity's wrong-code budget is spent). */
export type CodeCheck = { kind: 'verified'; challenge: ChallengeRow } | { kind: 'refused'; budgetRetryAfterSeconds?: number }

const wrongCodeBucket = (deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>, purpose: ChallengePurpose, owner: string) =>
  bucketKeys(deps, `wrong-codes:${purpose}`, owner)

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
  options: { accept?: (challenge: ChallengeRow) => boolean; budgetOwner?: string } = {},
): Promise<CodeCheck> {
  const now = deps.clock()
  const bucket = wrongCodeBucket(deps, subject.purpose, options.budgetOwner ?? `identity:${subject.identityId}`)
  const budgetRetryAfterSeconds = await budget.checkTx(trx, bucket, WRONG_CODES, now)
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
    await budget.spendTx(trx, bucket, now)
    if ((await spendAttemptTx(trx, open.id)) <= 0) await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
    return { kind: 'refused' }
  }
  await consumeChallengeTx(trx, open.id, now)
  await deadLetterChallengeMessagesTx(trx, open.id, 'challenge_consumed', now)
  return { kind: 'verified', challenge: open }
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
): Promise<void> {
  const now = deps.clock()
  const bucket = wrongCodeBucket(deps, purpose, `identifier:${identifier.kind}:${canonicalDestination(identifier)}`)
  if ((await budget.checkTx(trx, bucket, WRONG_CODES, now)) === undefined) await budget.spendTx(trx, bucket, now)
}
