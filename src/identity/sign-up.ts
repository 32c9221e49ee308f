import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { withTransientRetry } from '../db/transient.ts'
import { checkCodeTx, refuseUnknownCodeTx } from './challenge-codes.ts'
import { issueHidden } from './challenge-issue.ts'
import { assertChannelAvailable, challengeExpiry, type ChallengeDeps } from './challenges.ts'
import { findOpenChallenge } from './challenges-sql.ts'
import { trustDeviceTx, type DeviceCookie } from './devices.ts'
import { InvalidCodeError } from './errors.ts'
import { activateIdentityTx, findClaims, lockIdentifierForSignUpTx, setPasswordTx, verifyClaimTx, type ClaimRow } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import type { AcceptedPassword } from './password-policy.ts'
import type { Requester } from './requester.ts'
import { hashPassword, verifyPassword } from './secrets.ts'
import { createSessionTx } from './sessions.ts'

/**
 * POST /sign-ups. A new identifier gets a pending identity and a sign-up code (a repeat is a
 * resend and keeps the latest password as the candidate). An identifier that already belongs to an
 * active identity gets the same 202, and its owner a password-recovery code instead: they learn
 * someone tried, and can get in if it was them; the caller learns nothing. A refused resend (too
 * soon, over the destination's budget) is hidden behind the same 202 on both paths.
 */
export async function signUp(
  db: Knex,
  deps: ChallengeDeps,
  input: { identifier: Identifier; password: AcceptedPassword; requester: Requester },
): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, input.identifier)
  const candidatePasswordHash = await hashPassword(input.password)
  // A deadlock or timeout is tried again in a new transaction, else answered 503: never a 202 without the commit.
  return await withTransientRetry(
    db,
    (runner) =>
      runner.transaction(async (trx) => {
        const now = deps.clock()
        await lockIdentifierForSignUpTx(trx, input.identifier)
        const claims = await findClaims(trx, input.identifier)
        const owner = claims.find((claim) => claim.verified_at && claim.identity_status === 'active')
        // Every path writes a claim (real or rehearsed) and issues a challenge: the same work (`issueHidden`).
        // A stranger's on both: whoever asks a sign-up can aim it at any identifier, and the owner's
        // recovery code it sends must count where the unknown path's sign-up code would, or the
        // fleet's send caps would tell a stranger which one it was (docs/security.md "Caps from the owner's side").
        if (owner) {
          const subject = { identityId: owner.identity_id, loginIdentifierId: owner.login_identifier_id }
          await issueHidden(
            trx,
            deps,
            'sign-up notice',
            { purpose: 'password_recovery', identifier: input.identifier, asked: 'stranger', subject },
            { now, claim: 'rehearse', requester: input.requester },
          )
        } else {
          const pending = pendingSignUp(claims)
          const subject = pending
            ? { identityId: pending.identity_id, loginIdentifierId: pending.login_identifier_id }
            : { identityId: uuidv7(), loginIdentifierId: uuidv7() }
          await issueHidden(
            trx,
            deps,
            'sign-up',
            { purpose: 'sign_up', identifier: input.identifier, asked: 'stranger', subject },
            { candidatePasswordHash, now, claim: pending ? 'rehearse' : 'insert', requester: input.requester },
          )
        }
        return { challengeExpiresAt: challengeExpiry(deps, now) }
      }),
    { logger: deps.logger, what: 'sign-up' },
  )
}

const pendingSignUp = (claims: ClaimRow[]) => claims.find((claim) => claim.identity_status === 'pending' && !claim.verified_at)

/**
 * POST /sign-ups/confirmation: the right code **and** the latest candidate password activate the
 * identity and open a session. Whoever asked last chose the candidate, so a code alone never
 * activates an account with somebody else's password (pre-account hijacking, in either order). A
 * wrong password is a wrong code: the same 422, one attempt spent. The password is checked
 * (argon2, against a decoy when there is nothing to check) before the transaction, so no lock is
 * held across it; the transaction then requires that the candidate is still the one checked.
 */
export async function confirmSignUp(
  db: Knex,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>,
  input: { identifier: Identifier; code: string; password: string; requester: Requester },
): Promise<{ token: string; expiresAt: Date; device: DeviceCookie }> {
  const pendingNow = pendingSignUp(await findClaims(db, input.identifier))
  const candidate = pendingNow
    ? ((
        await findOpenChallenge(
          db,
          { purpose: 'sign_up', identityId: pendingNow.identity_id, loginIdentifierId: pendingNow.login_identifier_id },
          deps.clock(),
        )
      )?.candidate_password_hash ?? undefined)
    : undefined
  const passwordMatches = await verifyPassword(candidate, input.password)
  const session = await db.transaction(async (trx) => {
    const pending = pendingSignUp(await findClaims(trx, input.identifier))
    if (!pending) {
      await refuseUnknownCodeTx(trx, deps, 'sign_up', input.identifier, input.requester)
      return undefined
    }
    const subject = { purpose: 'sign_up' as const, identityId: pending.identity_id, loginIdentifierId: pending.login_identifier_id }
    // The wrong-code budget of a sign-up is the address's, across every candidate password (a new
    // sign-up request buys no fresh guesses), sliced per client: an attacker's guesses from their
    // networks do not lock out the person who signs up from theirs.
    const checked = await checkCodeTx(trx, deps, subject, input.code, {
      accept: (challenge) => passwordMatches && challenge.candidate_password_hash === candidate,
      budgetOwner: `identifier:${input.identifier.kind}:${input.identifier.value}`,
      requester: input.requester,
    })
    if (checked.kind === 'refused' || !checked.challenge.candidate_password_hash) return undefined
    const now = deps.clock()
    await activateIdentityTx(trx, pending.identity_id)
    await verifyClaimTx(trx, pending.login_identifier_id, now)
    await setPasswordTx(trx, pending.identity_id, checked.challenge.candidate_password_hash, now)
    return {
      ...(await createSessionTx(trx, pending.identity_id, now)),
      device: await trustDeviceTx(trx, pending.identity_id, input.requester, now),
    }
  })
  if (!session) throw new InvalidCodeError()
  return session
}
