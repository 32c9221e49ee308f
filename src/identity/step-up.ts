import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { checkCodeTx } from './challenge-codes.ts'
import { issueChallengeTx } from './challenge-issue.ts'
import { assertChannelAvailable, limitIdentityTx, type ChallengeDeps } from './challenges.ts'
import { ConflictError, InvalidCodeError, RateLimitedError } from './errors.ts'
import { findPrimaryIdentifierTx } from './identities-sql.ts'
import { newToken } from './secrets.ts'
import { insertElevationTx } from './sessions-sql.ts'
import { ELEVATION_TTL_SECONDS, type SessionContext } from './sessions.ts'

/** Step-up codes one identity may ask for in an hour (its own destination allows as many). */
export const STEP_UPS_PER_HOUR = 5

/** POST /step-ups: a code to the caller's primary identifier (`findPrimaryIdentifierTx`), committed before any send. */
export async function startStepUp(db: Knex, deps: ChallengeDeps, session: SessionContext): Promise<{ challengeExpiresAt: Date }> {
  return await db.transaction(async (trx) => {
    const now = deps.clock()
    const target = await findPrimaryIdentifierTx(trx, session.identityId)
    if (!target) throw new ConflictError('no_verified_identifier', 'There is no verified identifier to send a code to.')
    assertChannelAvailable(deps, target)
    await limitIdentityTx(trx, deps, 'step_up', session.identityId, STEP_UPS_PER_HOUR, now)
    // Not counted against the destination's budget, which strangers can spend (sign-ups and
    // recoveries for the address): a step-up code goes only to the caller's own verified address and
    // is bounded per identity above, so nobody else can lock the owner out of stepping up.
    const issued = await issueChallengeTx(
      trx,
      deps,
      { purpose: 'step_up', identityId: session.identityId, loginIdentifierId: target.id, identifier: target, asked: 'owner' },
      { now, countDestination: false },
    )
    return { challengeExpiresAt: issued.expiresAt }
  })
}

/** POST /step-ups/confirmation: the right code yields an elevation token for this session, valid 5 minutes. */
export async function confirmStepUp(
  db: Knex,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'clock'>,
  session: SessionContext,
  code: string,
): Promise<{ elevationToken: string; expiresAt: Date }> {
  const elevation = await db.transaction(async (trx) => {
    const target = await findPrimaryIdentifierTx(trx, session.identityId)
    if (!target) return undefined
    const checked = await checkCodeTx(trx, deps, { purpose: 'step_up', identityId: session.identityId, loginIdentifierId: target.id }, code)
    if (checked.kind === 'refused') return checked.budgetRetryAfterSeconds
    const now = deps.clock()
    const { token, hash } = newToken()
    const expiresAt = new Date(now.getTime() + ELEVATION_TTL_SECONDS * 1000)
    await insertElevationTx(trx, {
      id: uuidv7(),
      identityId: session.identityId,
      sessionId: session.sessionId,
      tokenHash: hash,
      expiresAt,
      now,
    })
    return { elevationToken: token, expiresAt }
  })
  if (typeof elevation === 'number') throw new RateLimitedError(elevation, 'too_many_wrong_codes')
  if (!elevation) throw new InvalidCodeError()
  return elevation
}
