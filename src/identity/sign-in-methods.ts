import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { checkCodeTx } from './challenge-codes.ts'
import { issueChallengeTx } from './challenge-issue.ts'
import { assertChannelAvailable, limitIdentityTx, type ChallengeDeps } from './challenges.ts'
import { requireElevationTx } from './elevation.ts'
import { revokeOpenChallengesOfIdentifierTx } from './challenges-sql.ts'
import { ConflictError, InvalidCodeError, NotFoundError, RateLimitedError } from './errors.ts'
import { findClaims, findPrimaryIdentifierTx, insertClaimTx, unverifyIdentifierTx, verifyClaimTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import { notifyOtherIdentifiersTx } from './security-notices.ts'
import type { SessionContext } from './sessions.ts'
import { deadLetterChallengeMessagesTx } from '../outbox/web-functions-sql.ts'

/** Sign-in method additions one identity may start in an hour (each sends a code somewhere). */
export const SIGN_IN_METHOD_ADDITIONS_PER_HOUR = 10

/**
 * POST /sign-in-methods: needs a fresh step-up of this session (a stolen bearer token alone cannot
 * add the thief's address). Claims the identifier for the caller and sends it a code. An
 * identifier another identity already verified takes exactly the same path — the claim, the
 * challenge, the resend interval, the destination budget and the code to the address, whose owner
 * can ignore it — so no answer, refusal or timing tells the caller whether it belongs to someone;
 * the confirmation of such a claim is refused (409 `identifier_taken`) only to whoever holds the code.
 */
export async function addSignInMethod(
  db: Knex,
  deps: ChallengeDeps,
  session: SessionContext,
  input: { identifier: Identifier; elevationToken: string | undefined },
): Promise<{ challengeExpiresAt: Date }> {
  assertChannelAvailable(deps, input.identifier)
  return await db.transaction(async (trx) => {
    const now = deps.clock()
    await requireElevationTx(trx, session, input.elevationToken, now)
    await limitIdentityTx(trx, deps, 'add_sign_in_method', session.identityId, SIGN_IN_METHOD_ADDITIONS_PER_HOUR, now)
    const mine = (await findClaims(trx, input.identifier)).find((claim) => claim.identity_id === session.identityId)
    if (mine?.verified_at) throw new ConflictError('identifier_already_added', 'This identifier is already one of your sign-in methods.')
    const loginIdentifierId = mine?.login_identifier_id ?? uuidv7()
    if (!mine) await insertClaimTx(trx, loginIdentifierId, session.identityId, input.identifier, null, now)
    // A stranger's, whoever is signed in: the identifier is not yet this identity's, and may be anyone's (docs/security.md "Caps from the owner's side").
    const issued = await issueChallengeTx(
      trx,
      deps,
      { purpose: 'add_sign_in_method', identityId: session.identityId, loginIdentifierId, identifier: input.identifier, asked: 'stranger' },
      { now },
    )
    return { challengeExpiresAt: issued.expiresAt }
  })
}

/**
 * POST /sign-in-methods/confirmation: the right code verifies the identifier for the caller, and
 * every other verified identifier of the identity is told (a security notice).
 */
export async function confirmSignInMethod(
  db: Knex,
  deps: ChallengeDeps,
  session: SessionContext,
  input: { identifier: Identifier; code: string },
): Promise<{ identifier: string; kind: Identifier['kind'] }> {
  const confirmed = await db.transaction(async (trx) => {
    const mine = (await findClaims(trx, input.identifier)).find((claim) => claim.identity_id === session.identityId && !claim.verified_at)
    if (!mine) return false
    const checked = await checkCodeTx(
      trx,
      deps,
      { purpose: 'add_sign_in_method', identityId: session.identityId, loginIdentifierId: mine.login_identifier_id },
      input.code,
    )
    if (checked.kind === 'refused') return checked.budgetRetryAfterSeconds ?? false
    const now = deps.clock()
    await verifyClaimTx(trx, mine.login_identifier_id, now)
    await notifyOtherIdentifiersTx(trx, deps, {
      identityId: session.identityId,
      exceptLoginIdentifierId: mine.login_identifier_id,
      event: 'sign_in_method_added',
      identifier: input.identifier,
      now,
    })
    return true
  })
  if (typeof confirmed === 'number') throw new RateLimitedError(confirmed, 'too_many_wrong_codes')
  if (!confirmed) throw new InvalidCodeError()
  return { identifier: input.identifier.value, kind: input.identifier.kind }
}

/**
 * POST /sign-in-methods/removals: needs a fresh step-up of this session, like adding one. The
 * identifier stops signing in, its open challenges are revoked (their unsent codes dead-lettered
 * `challenge_consumed`) and every verified identifier of the identity — the removed one too — is
 * told. The primary identifier (where step-up codes go) cannot be removed: a stolen session that
 * once got past a step-up must not be able to cut the owner off from the next. An identifier that
 * is not one of the caller's verified ones is 404, whether or not someone else has it.
 */
export async function removeSignInMethod(
  db: Knex,
  deps: ChallengeDeps,
  session: SessionContext,
  input: { identifier: Identifier; elevationToken: string | undefined },
): Promise<void> {
  await db.transaction(async (trx) => {
    const now = deps.clock()
    await requireElevationTx(trx, session, input.elevationToken, now)
    const mine = (await findClaims(trx, input.identifier)).find((claim) => claim.identity_id === session.identityId && claim.verified_at)
    if (!mine) throw new NotFoundError('sign_in_method_not_found', 'This identifier is not one of your sign-in methods.')
    if ((await findPrimaryIdentifierTx(trx, session.identityId))?.id === mine.login_identifier_id)
      throw new ConflictError('primary_identifier', 'The primary identifier receives step-up codes and cannot be removed.')
    await notifyOtherIdentifiersTx(trx, deps, {
      identityId: session.identityId,
      event: 'sign_in_method_removed',
      identifier: input.identifier,
      now,
    })
    await unverifyIdentifierTx(trx, mine.login_identifier_id)
    for (const challengeId of await revokeOpenChallengesOfIdentifierTx(trx, mine.login_identifier_id, now))
      await deadLetterChallengeMessagesTx(trx, challengeId, 'challenge_consumed', now)
  })
}
