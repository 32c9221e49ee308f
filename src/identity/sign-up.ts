import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { assertChannelAvailable, challengeExpiry, checkCodeTx, issueChallengeTx, issueHiddenTx, type ChallengeDeps } from './challenges.ts'
import { InvalidCodeError } from './errors.ts'
import { activateIdentityTx, findClaimsTx, insertClaimTx, insertIdentityTx, setPasswordTx, verifyClaimTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import { hashPassword } from './secrets.ts'
import { createSessionTx } from './sessions.ts'

/**
 * POST /sign-ups. A new identifier gets a pending identity and a sign-up code (a repeat is a
 * resend and keeps the latest password). An identifier that already belongs to an active identity
 * gets the same 202, and its owner a password-recovery code instead: they learn someone tried,
 * and can get in if it was them; the caller learns nothing.
 */
export async function signUp(db: Knex, deps: ChallengeDeps, input: { identifier: Identifier; password: string }): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, input.identifier)
  const candidatePasswordHash = await hashPassword(input.password)
  return await db.transaction(async (trx) => {
    const now = deps.clock()
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`sign-up:${input.identifier.kind}:${input.identifier.value}`])
    const claims = await findClaimsTx(trx, input.identifier)
    const owner = claims.find((claim) => claim.verified_at && claim.identity_status === 'active')
    if (owner) {
      await issueHiddenTx(trx, deps, 'sign-up notice', (savepoint) =>
        issueChallengeTx(savepoint, deps, { purpose: 'password_recovery', identityId: owner.identity_id, loginIdentifierId: owner.login_identifier_id, identifier: input.identifier }, { now }),
      )
    } else {
      const pending = claims.find((claim) => claim.identity_status === 'pending')
      const subject = pending ? { identityId: pending.identity_id, loginIdentifierId: pending.login_identifier_id } : { identityId: uuidv7(), loginIdentifierId: uuidv7() }
      if (!pending) {
        await insertIdentityTx(trx, subject.identityId, 'pending', now)
        await insertClaimTx(trx, subject.loginIdentifierId, subject.identityId, input.identifier, null, now)
      }
      await issueHiddenTx(trx, deps, 'sign-up', (savepoint) =>
        issueChallengeTx(savepoint, deps, { purpose: 'sign_up', ...subject, identifier: input.identifier }, { candidatePasswordHash, now }),
      )
    }
    return { challengeExpiresAt: challengeExpiry(deps, now) }
  })
}

/** POST /sign-ups/confirmation: the right code activates the identity and opens a session. */
export async function confirmSignUp(db: Knex, deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>, input: { identifier: Identifier; code: string }): Promise<{ token: string; expiresAt: Date }> {
  const session = await db.transaction(async (trx) => {
    const pending = (await findClaimsTx(trx, input.identifier)).find((claim) => claim.identity_status === 'pending' && !claim.verified_at)
    if (!pending) return undefined
    const challenge = await checkCodeTx(trx, deps, { purpose: 'sign_up', identityId: pending.identity_id, loginIdentifierId: pending.login_identifier_id }, input.code)
    if (!challenge?.candidate_password_hash) return undefined
    const now = deps.clock()
    await activateIdentityTx(trx, pending.identity_id)
    await verifyClaimTx(trx, pending.login_identifier_id, now)
    await setPasswordTx(trx, pending.identity_id, challenge.candidate_password_hash, now)
    return await createSessionTx(trx, pending.identity_id, now)
  })
  if (!session) throw new InvalidCodeError()
  return session
}
