import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { assertChannelAvailable, checkCodeTx, issueChallengeTx, type ChallengeDeps } from './challenges.ts'
import { ConflictError, InvalidCodeError } from './errors.ts'
import { findStepUpIdentifierTx } from './identities-sql.ts'
import { newToken } from './secrets.ts'
import { insertElevationTx } from './sessions-sql.ts'
import { ELEVATION_TTL_SECONDS, type SessionContext } from './sessions.ts'

/** POST /step-ups: a code to the caller's verified email (else phone), committed before any send (OX-S4). */
export async function startStepUp(db: Knex, deps: ChallengeDeps, session: SessionContext): Promise<{ challengeExpiresAt: Date }> {
  return await db.transaction(async (trx) => {
    const target = await findStepUpIdentifierTx(trx, session.identityId)
    if (!target) throw new ConflictError('no_verified_identifier', 'There is no verified identifier to send a code to.')
    assertChannelAvailable(deps, target)
    const issued = await issueChallengeTx(trx, deps, { purpose: 'step_up', identityId: session.identityId, loginIdentifierId: target.id, identifier: target })
    return { challengeExpiresAt: issued.expiresAt }
  })
}

/** POST /step-ups/confirmation: the right code yields an elevation token for this session, valid 5 minutes. */
export async function confirmStepUp(db: Knex, deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>, session: SessionContext, code: string): Promise<{ elevationToken: string; expiresAt: Date }> {
  const elevation = await db.transaction(async (trx) => {
    const target = await findStepUpIdentifierTx(trx, session.identityId)
    if (!target) return undefined
    const challenge = await checkCodeTx(trx, deps, { purpose: 'step_up', identityId: session.identityId, loginIdentifierId: target.id }, code)
    if (!challenge) return undefined
    const now = deps.clock()
    const { token, hash } = newToken()
    const expiresAt = new Date(now.getTime() + ELEVATION_TTL_SECONDS * 1000)
    await insertElevationTx(trx, { id: uuidv7(), identityId: session.identityId, sessionId: session.sessionId, tokenHash: hash, expiresAt, now })
    return { elevationToken: token, expiresAt }
  })
  if (!elevation) throw new InvalidCodeError()
  return elevation
}
