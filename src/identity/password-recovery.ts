import type { Knex } from 'knex'
import { withTransientRetry } from '../db/transient.ts'
import { checkCodeTx, forgiveSignedInGuessesTx, refuseUnknownCodeTx } from './challenge-codes.ts'
import { issueHidden } from './challenge-issue.ts'
import { assertChannelAvailable, challengeExpiry, type ChallengeDeps } from './challenges.ts'
import { InvalidCodeError } from './errors.ts'
import { replacePasswordTx } from './credentials.ts'
import { findVerifiedIdentifier, findVerifiedIdentifierWithOpenChallenge } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import type { AcceptedPassword } from './password-policy.ts'
import { trustDeviceTx, type DeviceCookie } from './devices.ts'
import { INTERNAL_REQUESTER, type Requester } from './requester.ts'
import { hashPassword } from './secrets.ts'
import { notifyOtherIdentifiersTx } from './security-notices.ts'

export type { ChallengeDeps } from './challenges.ts'

/**
 * The challenge and its outbox message commit together, or neither does: two statements and no
 * transaction of its own — the lookup, then one call of `identity.issue_challenge` (its own
 * transaction when `db` is not one: the challenge, message, envelope and job at one COMMIT). In the
 * caller's transaction when given one. Known and unknown identifiers get the same answer after the
 * same work (`issueHidden`): a known one a rehearsed claim and a real challenge, an unknown one
 * both rehearsed; every existence-dependent failure (a resend too soon, a destination over its
 * budget) is logged, not shown; a transient database error is not (src/db/transient.ts).
 */
export async function requestPasswordRecovery(
  db: Knex | Knex.Transaction,
  deps: ChallengeDeps,
  identifier: Identifier,
  requester: Requester = INTERNAL_REQUESTER,
): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, identifier)
  // A deadlock or timeout is tried again from the lookup (each try its own commit), else answered 503: never a 202 without the commit.
  return await withTransientRetry(
    db,
    async (runner) => {
      const now = deps.clock()
      const known = await findVerifiedIdentifierWithOpenChallenge(runner, identifier, 'password_recovery', now)
      const subject = known ? { identityId: known.identity_id, loginIdentifierId: known.login_identifier_id } : undefined
      // A known identifier has its claim: a rehearsed one keeps both paths' work equal (an unknown one's is in the rehearsed issue).
      // The owner's: only the identity's verified identifier gets it (an unknown one, nothing), so it is never held by a send cap.
      await issueHidden(
        runner,
        deps,
        'password recovery',
        { purpose: 'password_recovery', identifier, asked: 'owner', subject, openChallengeId: known?.open_challenge_id ?? null },
        { now, claim: known ? 'rehearse' : 'none', requester },
      )
      return { challengeExpiresAt: challengeExpiry(deps, now) }
    },
    { logger: deps.logger, what: 'password recovery' },
  )
}

/**
 * Sets the new password, revokes every session of the identity and tells its other verified
 * identifiers, or refuses the code (the same 422 whether or not the identifier is known).
 */
export async function completePasswordRecovery(
  db: Knex,
  deps: ChallengeDeps,
  input: { identifier: Identifier; code: string; newPassword: AcceptedPassword; requester: Requester },
): Promise<DeviceCookie> {
  const passwordHash = await hashPassword(input.newPassword)
  const completed = await db.transaction(async (trx) => {
    const known = await findVerifiedIdentifier(trx, input.identifier)
    if (!known) {
      await refuseUnknownCodeTx(trx, deps, 'password_recovery', input.identifier, input.requester)
      return undefined
    }
    const checked = await checkCodeTx(
      trx,
      deps,
      { purpose: 'password_recovery', identityId: known.identity_id, loginIdentifierId: known.login_identifier_id },
      input.code,
      { requester: input.requester },
    )
    if (checked.kind === 'refused') return undefined
    const now = deps.clock()
    await replacePasswordTx(trx, { identityId: known.identity_id, passwordHash, now })
    await forgiveSignedInGuessesTx(trx, deps, known.identity_id)
    await notifyOtherIdentifiersTx(trx, deps, {
      identityId: known.identity_id,
      exceptLoginIdentifierId: known.login_identifier_id,
      event: 'password_changed',
      identifier: input.identifier,
      now,
    })
    // Every device was forgotten with the old password; the client that proved the mailbox is the owner's.
    return await trustDeviceTx(trx, known.identity_id, input.requester, now)
  })
  if (!completed) throw new InvalidCodeError()
  return completed
}
