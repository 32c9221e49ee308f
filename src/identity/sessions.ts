import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { insertSessionTx } from './sessions-sql.ts'
import { newToken } from './secrets.ts'

export const SESSION_TTL_SECONDS = 24 * 3600
export const ELEVATION_TTL_SECONDS = 5 * 60

/** The signed-in caller, as the bearer middleware resolved it. */
export type SessionContext = { sessionId: string; identityId: string }

/** A new session: the token goes to the client once; only its hash is stored. */
export async function createSessionTx(trx: Knex.Transaction, identityId: string, now: Date): Promise<{ token: string; expiresAt: Date }> {
  const { token, hash } = newToken()
  const expiresAt = new Date(now.getTime() + SESSION_TTL_SECONDS * 1000)
  await insertSessionTx(trx, { id: uuidv7(), identityId, tokenHash: hash, expiresAt, now })
  return { token, expiresAt }
}
