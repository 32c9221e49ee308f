import type { Knex } from 'knex'
import { isCurrentPasswordTx } from './credentials.ts'
import { trustDeviceTx, type DeviceCookie } from './devices.ts'
import { InvalidCredentialsError } from './errors.ts'
import { findPasswordHash, findVerifiedIdentifier } from './identities-sql.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { spendTiersTx, tiersWait, type OwnerBudget } from './rate-limits.ts'
import { ownerBudgetTiers, type Requester } from './requester.ts'
import { verifyPassword } from './secrets.ts'
import { createSessionTx } from './sessions.ts'

/**
 * Wrong passwords one identifier may be tried with in a quarter hour. Past them no password signs
 * in, not even the right one, until the window passes — for the client that spent them (five from
 * one network) or for every anonymous client (ten from all), but never for a client that signed
 * in as the account before (its own ten): a stranger cannot lock the owner's device out. Counted
 * per identifier whether or not an account has it, so the refusal tells nothing, and answered
 * with the ordinary 401 (no Retry-After) for the same reason.
 */
export const SIGN_IN_FAILURES: OwnerBudget = Object.freeze({
  perClient: { max: 5, windowSeconds: 15 * 60 },
  ceiling: { max: 10, windowSeconds: 15 * 60 },
  perDevice: { max: 10, windowSeconds: 15 * 60 },
})

/** POST /sessions: any verified identifier and the password; one refusal for every way to fail. */
export async function signIn(
  db: Knex,
  deps: { clock: () => Date; codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] },
  input: { identifier: Identifier; password: string; requester: Requester },
): Promise<{ token: string; expiresAt: Date; device: DeviceCookie }> {
  const known = await findVerifiedIdentifier(db, input.identifier)
  const tiers = ownerBudgetTiers(
    deps,
    `sign-in-failures:${input.identifier.kind}`,
    canonicalDestination(input.identifier),
    SIGN_IN_FAILURES,
    input.requester,
    known?.identity_id,
  )
  const storedHash = known ? await findPasswordHash(db, known.identity_id) : undefined
  // Verified before any lock is taken; the budget decides afterwards whether a match may count.
  const matches = await verifyPassword(storedHash, input.password)
  const session = await db.transaction(async (trx) => {
    const now = deps.clock()
    if ((await tiersWait(trx, tiers, now)) !== undefined) return undefined
    if (!matches || !known) {
      await spendTiersTx(trx, tiers, now)
      return undefined
    }
    // Verified outside this transaction: a password changed since (a recovery) opens nothing (credentials.ts).
    if (!(await isCurrentPasswordTx(trx, known.identity_id, storedHash))) return undefined
    return {
      ...(await createSessionTx(trx, known.identity_id, now)),
      device: await trustDeviceTx(trx, known.identity_id, input.requester, now),
    }
  })
  if (!session) throw new InvalidCredentialsError()
  return session
}
