import type { Knex } from 'knex'
import { isCurrentPasswordTx } from './credentials.ts'
import { InvalidCredentialsError } from './errors.ts'
import { findPasswordHashTx, findVerifiedIdentifierTx } from './identities-sql.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { budget, type Limit } from './rate-limits.ts'
import { bucketKeys, verifyPassword } from './secrets.ts'
import { createSessionTx } from './sessions.ts'

/**
 * Wrong passwords one identifier may be tried with in a quarter hour, from anywhere: beyond it no
 * password signs in, not even the right one, until the window passes. Counted per identifier
 * whether or not an account has it, so the refusal tells nothing, and answered with the ordinary
 * 401 (no Retry-After) for the same reason.
 */
export const SIGN_IN_FAILURES: Limit = { max: 10, windowSeconds: 15 * 60 }

/** POST /sessions: any verified identifier and the password; one refusal for every way to fail. */
export async function signIn(
  db: Knex,
  deps: { clock: () => Date; codeHashKey: Buffer; codeHashKeys?: readonly Buffer[] },
  input: { identifier: Identifier; password: string },
): Promise<{ token: string; expiresAt: Date }> {
  const bucket = bucketKeys(deps, `sign-in-failures:${input.identifier.kind}`, canonicalDestination(input.identifier))
  const known = await findVerifiedIdentifierTx(db, input.identifier)
  const storedHash = known ? await findPasswordHashTx(db, known.identity_id) : undefined
  // Verified before any lock is taken; the budget decides afterwards whether a match may count.
  const matches = await verifyPassword(storedHash, input.password)
  const session = await db.transaction(async (trx) => {
    const now = deps.clock()
    if ((await budget.checkTx(trx, bucket, SIGN_IN_FAILURES, now)) !== undefined) return undefined
    if (!matches || !known) {
      await budget.spendTx(trx, bucket, now)
      return undefined
    }
    // Verified outside this transaction: a password changed since (a recovery) opens nothing (credentials.ts).
    if (!(await isCurrentPasswordTx(trx, known.identity_id, storedHash))) return undefined
    return await createSessionTx(trx, known.identity_id, now)
  })
  if (!session) throw new InvalidCredentialsError()
  return session
}
