import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { assertChannelAvailable, challengeExpiry, checkCodeTx, issueChallengeTx, type ChallengeDeps } from './challenges.ts'
import { ConflictError, InvalidCodeError } from './errors.ts'
import { findClaimsTx, insertClaimTx, verifyClaimTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import type { SessionContext } from './sessions.ts'

/**
 * POST /sign-in-methods: claims the identifier for the caller and sends it a code. An identifier
 * another identity already verified gets the same 202 and nothing is sent (logged).
 */
export async function addSignInMethod(db: Knex, deps: ChallengeDeps, session: SessionContext, identifier: Identifier): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, identifier)
  return await db.transaction(async (trx) => {
    const now = deps.clock()
    const claims = await findClaimsTx(trx, identifier)
    const mine = claims.find((claim) => claim.identity_id === session.identityId)
    if (mine?.verified_at) throw new ConflictError('identifier_already_added', 'This identifier is already one of your sign-in methods.')
    if (claims.some((claim) => claim.verified_at && claim.identity_id !== session.identityId)) {
      deps.logger.warn('sign-in method belongs to another identity; nothing sent', { identityId: session.identityId })
      return { challengeExpiresAt: challengeExpiry(deps, now) }
    }
    const loginIdentifierId = mine?.login_identifier_id ?? uuidv7()
    if (!mine) await insertClaimTx(trx, loginIdentifierId, session.identityId, identifier, null, now)
    const issued = await issueChallengeTx(trx, deps, { purpose: 'add_sign_in_method', identityId: session.identityId, loginIdentifierId, identifier })
    return { challengeExpiresAt: issued.expiresAt }
  })
}

/** POST /sign-in-methods/confirmation: the right code verifies the identifier for the caller. */
export async function confirmSignInMethod(
  db: Knex,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>,
  session: SessionContext,
  input: { identifier: Identifier; code: string },
): Promise<{ identifier: string; kind: Identifier['kind'] }> {
  const confirmed = await db.transaction(async (trx) => {
    const mine = (await findClaimsTx(trx, input.identifier)).find((claim) => claim.identity_id === session.identityId && !claim.verified_at)
    if (!mine) return false
    const challenge = await checkCodeTx(trx, deps, { purpose: 'add_sign_in_method', identityId: session.identityId, loginIdentifierId: mine.login_identifier_id }, input.code)
    if (!challenge) return false
    await verifyClaimTx(trx, mine.login_identifier_id, deps.clock())
    return true
  })
  if (!confirmed) throw new InvalidCodeError()
  return { identifier: input.identifier.value, kind: input.identifier.kind }
}
