import type { Knex } from 'knex'
import { InvalidCredentialsError } from './errors.ts'
import { findPasswordHashTx, findVerifiedIdentifierTx } from './identities-sql.ts'
import type { Identifier } from './identifiers.ts'
import { verifyPassword } from './secrets.ts'
import { createSessionTx } from './sessions.ts'

/** POST /sessions: any verified identifier and the password; one refusal for every way to fail. */
export async function signIn(db: Knex, clock: () => Date, input: { identifier: Identifier; password: string }): Promise<{ token: string; expiresAt: Date }> {
  const known = await findVerifiedIdentifierTx(db, input.identifier)
  const storedHash = known ? await findPasswordHashTx(db, known.identity_id) : undefined
  if (!(await verifyPassword(storedHash, input.password)) || !known) throw new InvalidCredentialsError()
  return await db.transaction((trx) => createSessionTx(trx, known.identity_id, clock()))
}
