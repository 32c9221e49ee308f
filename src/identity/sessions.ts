import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { findLiveSessions, insertSessionTx, useSession, type SessionLifetime, type SessionRow } from './sessions-sql.ts'
import { newToken } from './secrets.ts'

export const SESSION_TTL_SECONDS = 24 * 3600
export const ELEVATION_TTL_SECONDS = 5 * 60
/** A session unused this long is over, whatever its absolute expiry (ASVS 3.3.2). */
export const SESSION_IDLE_SECONDS = 30 * 60
/** How stale the mark of last use may get before a request moves it: one write a minute, not one a request. */
export const SESSION_TOUCH_SECONDS = 60
/** The most sessions GET /sessions lists (newest first). */
export const SESSIONS_LISTED = 100

const LIFETIME: SessionLifetime = { idleSeconds: SESSION_IDLE_SECONDS, touchSeconds: SESSION_TOUCH_SECONDS }

/** The signed-in caller, as the bearer middleware resolved it. */
export type SessionContext = { sessionId: string; identityId: string }

/** One of the caller's live sessions, as GET /sessions shows it. */
export type SessionSummary = { id: string; createdAt: Date; lastUsedAt: Date; expiresAt: Date; current: boolean }

/** A new session: the token goes to the client once; only its hash is stored. */
export async function createSessionTx(trx: Knex.Transaction, identityId: string, now: Date): Promise<{ token: string; expiresAt: Date }> {
  const { token, hash } = newToken()
  const expiresAt = new Date(now.getTime() + SESSION_TTL_SECONDS * 1000)
  await insertSessionTx(trx, { id: uuidv7(), identityId, tokenHash: hash, expiresAt, now })
  return { token, expiresAt }
}

/** The live session of a token hash (neither revoked, expired nor idle), now marked used. */
export async function resolveSession(db: Knex, tokenHash: Buffer, now: Date): Promise<SessionRow | undefined> {
  return await useSession(db, tokenHash, now, LIFETIME)
}

/** GET /sessions: the caller's live sessions, newest first; never a token or its hash. */
export async function listSessions(db: Knex, session: SessionContext, now: Date): Promise<SessionSummary[]> {
  const rows = await findLiveSessions(db, session.identityId, now, LIFETIME, SESSIONS_LISTED)
  return rows.map((row) => ({
    id: row.id,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
    current: row.id === session.sessionId,
  }))
}
