import type { Knex } from 'knex'
import { describeError } from '../logging/logger.ts'
import { assertChannelAvailable, checkCodeTx, issueChallengeTx, type ChallengeDeps } from './challenges.ts'
import { InvalidCodeError } from './errors.ts'
import { findVerifiedIdentifierTx, setPasswordTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import { hashPassword } from './secrets.ts'
import { revokeAllSessionsTx } from './sessions-sql.ts'

export type { ChallengeDeps } from './challenges.ts'

/**
 * Issues a challenge in a savepoint and hides any failure of it behind the caller's ordinary
 * answer: used where the failure itself would reveal that an account exists (OX-S3).
 */
export async function issueHiddenTx(trx: Knex.Transaction, deps: ChallengeDeps, flow: string, issue: (savepoint: Knex.Transaction) => Promise<unknown>): Promise<void> {
  await trx.transaction(issue).catch((error: unknown) => deps.logger.warn(`${flow} not enqueued`, describeError(error)))
}

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
  return { challengeExpiresAt: new Date(now.getTime() + deps.challengeTtlSeconds * 1000) }
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
