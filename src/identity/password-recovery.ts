import type { Knex } from 'knex'
import { assertChannelAvailable, challengeExpiry, checkCodeTx, issueChallengeTx, issueHiddenTx, type ChallengeDeps } from './challenges.ts'
import { InvalidCodeError } from './errors.ts'
import { findVerifiedIdentifierTx, setPasswordTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import { hashPassword } from './secrets.ts'
import { revokeAllSessionsTx } from './sessions-sql.ts'

export type { ChallengeDeps } from './challenges.ts'

/**
 * OX-S3: the challenge and its outbox message commit together, or neither does. Known and unknown
 * identifiers get the same answer; the per-destination limit counts both alike, and every
 * existence-dependent failure (a resend too soon, an enqueue error) is logged, not shown.
 */
export async function requestPasswordRecoveryTx(trx: Knex.Transaction, deps: ChallengeDeps, identifier: Identifier): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, identifier)
  const now = deps.clock()
  const known = await findVerifiedIdentifierTx(trx, identifier)
  if (known) {
    await issueHiddenTx(trx, deps, 'password recovery', (savepoint) =>
      issueChallengeTx(savepoint, deps, { purpose: 'password_recovery', identityId: known.identity_id, loginIdentifierId: known.login_identifier_id, identifier }, { now }),
    )
  }
  return { challengeExpiresAt: challengeExpiry(deps, now) }
}

/** Sets the new password and revokes every session of the identity, or refuses the code. */
export async function completePasswordRecovery(
  db: Knex,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>,
  input: { identifier: Identifier; code: string; newPassword: string },
): Promise<void> {
  const passwordHash = await hashPassword(input.newPassword)
  const completed = await db.transaction(async (trx) => {
    const known = await findVerifiedIdentifierTx(trx, input.identifier)
    if (!known) return false
    const challenge = await checkCodeTx(trx, deps, { purpose: 'password_recovery', identityId: known.identity_id, loginIdentifierId: known.login_identifier_id }, input.code)
    if (!challenge) return false
    const now = deps.clock()
    await setPasswordTx(trx, known.identity_id, passwordHash, now)
    await revokeAllSessionsTx(trx, known.identity_id, now)
    return true
  })
  if (!completed) throw new InvalidCodeError()
}
