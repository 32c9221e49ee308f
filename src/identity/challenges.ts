import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { generateCode, hashCode, verifyCode } from '../crypto/codes.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import type { Channel } from '../outbox/constants.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import { consumeChallengeTx, insertChallengeTx, lockOpenChallengeTx, rotateChallengeCodeTx, spendAttemptTx, type ChallengeRow, type ChallengeSubject } from './challenges-sql.ts'
import { ChannelUnavailableError, RateLimitedError } from './errors.ts'
import { channelFor, type Identifier } from './identifiers.ts'
import { hitRateLimitTx } from './rate-limits.ts'
import { bucketKey } from './secrets.ts'

/** What the challenge use cases need; the web builds it once from configuration. */
export type ChallengeDeps = EnqueueDeps & {
  codeHashKey: Buffer
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

/** OB7/OX-S8 limits: one resend per 30 s, five per challenge, five codes per destination per hour. */
export const CHALLENGE_LIMITS = Object.freeze({ resendIntervalSeconds: 30, maxResends: 5, codesPerDestinationPerHour: 5 })

/** When a challenge issued at `now` stops verifying. */
export function challengeExpiry(deps: Pick<ChallengeDeps, 'challengeTtlSeconds'>, now: Date): Date {
  return new Date(now.getTime() + deps.challengeTtlSeconds * 1000)
}

/**
 * Issues a challenge in a savepoint and hides any failure of it behind the caller's ordinary
 * answer: used where the failure itself would reveal that an account exists (OX-S3). Logged by
 * error name and code.
 */
export async function issueHiddenTx(trx: Knex.Transaction, deps: ChallengeDeps, flow: string, issue: (savepoint: Knex.Transaction) => Promise<unknown>): Promise<void> {
  await trx.transaction(issue).catch((error: unknown) => deps.logger.warn(`${flow} not enqueued`, describeError(error)))
}

/** A phone number without WhatsApp settings is refused up front, never enqueued. */
export function assertChannelAvailable(deps: Pick<ChallengeDeps, 'channels'>, identifier: Identifier): void {
  if (!deps.channels.has(channelFor(identifier))) throw new ChannelUnavailableError()
}

/**
 * Counts a code about to be sent to this destination, across every web process; the 6th in an
 * hour is refused. Only codes are counted, so where a refusal would reveal an account the flow
 * hides it (issueHiddenTx) like any other existence-dependent failure.
 */
async function enforceDestinationLimitTx(trx: Knex.Transaction, deps: ChallengeDeps, identifier: Identifier, now: Date): Promise<void> {
  await hitRateLimitTx(trx, bucketKey(deps.codeHashKey, `destination:${identifier.kind}`, identifier.value), { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 }, now)
}

/**
 * Opens a challenge for the subject, or, when one is open, resends it: a new code replaces the
 * old (which stops verifying), every older unsent message is dead-lettered `superseded_by_resend`,
 * and the new message is enqueued — all in the caller's transaction. Refused with RateLimitedError
 * for a resend within 30 s, past five resends, or past five codes an hour to the destination. Concurrent requests for one
 * subject queue on an advisory lock, so only one resend wins each 30 s window.
 */
export async function issueChallengeTx(
  trx: Knex.Transaction,
  deps: ChallengeDeps,
  subject: ChallengeSubject & { identifier: Identifier },
  options: { candidatePasswordHash?: string; now?: Date } = {},
): Promise<{ challengeId: string; expiresAt: Date }> {
  const now = options.now ?? deps.clock()
  const expiresAt = challengeExpiry(deps, now)
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`challenge:${subject.purpose}:${subject.identityId}:${subject.loginIdentifierId}`])
  const open = await lockOpenChallengeTx(trx, subject, now)
  const code = generateCode()
  try {
    let challengeId: string
    if (open) {
      const waitMs = open.last_sent_at.getTime() + CHALLENGE_LIMITS.resendIntervalSeconds * 1000 - now.getTime()
      if (waitMs > 0) throw new RateLimitedError(waitMs / 1000, 'resend_too_soon')
      if (open.resend_count >= CHALLENGE_LIMITS.maxResends) throw new RateLimitedError((open.expires_at.getTime() - now.getTime()) / 1000, 'too_many_resends')
      challengeId = open.id
      await trx.raw('SELECT outbox.dead_letter_open_messages(?, ?)', [challengeId, 'superseded_by_resend'])
      await rotateChallengeCodeTx(trx, challengeId, { codeHash: hashCode(deps.codeHashKey, challengeId, code), expiresAt, now, candidatePasswordHash: options.candidatePasswordHash })
    } else {
      challengeId = uuidv7()
      await insertChallengeTx(trx, {
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
    await enforceDestinationLimitTx(trx, deps, subject.identifier, now)
    await enqueueSecurityMessageTx(
      trx,
      deps,
      { purpose: subject.purpose, challengeId, channel: channelFor(subject.identifier), destination: subject.identifier.value, locale: deps.locale ?? 'en', expiresAt },
      code,
    )
    await deps.afterEnqueueTx?.(trx)
    return { challengeId, expiresAt }
  } finally {
    code.fill(0)
  }
}

/**
 * Checks a code against the subject's open challenge. Right: the challenge is consumed and its
 * unsent messages dead-lettered `challenge_consumed` (OX-W7's gap, closed). Wrong: one attempt is
 * spent (at zero the challenge is dead). Returns the consumed challenge, or undefined — the caller
 * commits either way, so a wrong guess is counted, and only then refuses.
 */
export async function checkCodeTx(trx: Knex.Transaction, deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>, subject: ChallengeSubject, code: string): Promise<ChallengeRow | undefined> {
  const now = deps.clock()
  const open = await lockOpenChallengeTx(trx, subject, now)
  if (!open) return undefined
  if (!/^\d{6}$/.test(code) || !verifyCode(deps.codeHashKey, open.id, code, open.code_hash)) {
    await spendAttemptTx(trx, open.id)
    return undefined
  }
  await consumeChallengeTx(trx, open.id, now)
  await trx.raw('SELECT outbox.dead_letter_open_messages(?, ?)', [open.id, 'challenge_consumed'])
  return open
}
