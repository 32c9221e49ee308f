import type { Knex } from 'knex'

export type SessionRow = { id: string; identity_id: string; expires_at: Date }

/** One of an identity's live sessions as its owner may see it: never its token or hash. */
export type SessionListRow = { id: string; created_at: Date; last_used_at: Date; expires_at: Date }

/** A session dies `idleSeconds` after its last use; its mark of use moves at most every `touchSeconds`. */
export type SessionLifetime = { idleSeconds: number; touchSeconds: number }

export async function insertSessionTx(
  trx: Knex.Transaction,
  session: { id: string; identityId: string; tokenHash: Buffer; expiresAt: Date; now: Date },
): Promise<void> {
  await trx('identity.sessions').insert({
    id: session.id,
    identity_id: session.identityId,
    token_hash: session.tokenHash,
    expires_at: session.expiresAt,
    created_at: session.now,
    last_used_at: session.now,
  })
}

// Live: unrevoked, before its absolute expiry, used within the idle timeout (a session the previous
// release inserted has no last_used_at: its creation counts).
const LIVE = `s.revoked_at IS NULL AND s.expires_at > :now AND coalesce(s.last_used_at, s.created_at) > :now::timestamptz - make_interval(secs => :idle)`

/**
 * The live session of a token, of an active identity, marked used at `now` in the same statement
 * when its mark is `touchSeconds` old or more: a write per session a minute at most, not one per
 * request.
 */
export async function useSession(db: Knex, tokenHash: Buffer, now: Date, lifetime: SessionLifetime): Promise<SessionRow | undefined> {
  const { rows } = await db.raw<{ rows: SessionRow[] }>(
    `WITH live AS (
       SELECT s.id, s.identity_id, s.expires_at, coalesce(s.last_used_at, s.created_at) AS used_at
         FROM identity.sessions s JOIN identity.identities i ON i.id = s.identity_id AND i.status = 'active'
        WHERE s.token_hash = :tokenHash AND ${LIVE}
     ), touched AS (
       UPDATE identity.sessions s SET last_used_at = :now FROM live
        WHERE s.id = live.id AND live.used_at <= :now::timestamptz - make_interval(secs => :touch)
     )
     SELECT id, identity_id, expires_at FROM live`,
    { tokenHash, now, idle: lifetime.idleSeconds, touch: lifetime.touchSeconds },
  )
  return rows[0]
}

/** The identity's live sessions, newest first, at most `limit`. */
export async function findLiveSessions(
  db: Knex,
  identityId: string,
  now: Date,
  lifetime: SessionLifetime,
  limit: number,
): Promise<SessionListRow[]> {
  const { rows } = await db.raw<{ rows: SessionListRow[] }>(
    `SELECT s.id, s.created_at, coalesce(s.last_used_at, s.created_at) AS last_used_at, s.expires_at
       FROM identity.sessions s
      WHERE s.identity_id = :identityId AND ${LIVE}
      ORDER BY s.created_at DESC, s.id DESC
      LIMIT :limit`,
    { identityId, now, idle: lifetime.idleSeconds, limit },
  )
  return rows
}

export async function revokeSession(db: Knex, id: string, now: Date): Promise<void> {
  await db('identity.sessions').where({ id }).whereNull('revoked_at').update({ revoked_at: now })
}

/** Revokes every live session of the identity, but `exceptId` when given. */
export async function revokeAllSessionsTx(trx: Knex.Transaction, identityId: string, now: Date, exceptId?: string): Promise<void> {
  const live = trx('identity.sessions').where({ identity_id: identityId }).whereNull('revoked_at')
  await (exceptId === undefined ? live : live.whereNot({ id: exceptId })).update({ revoked_at: now })
}

export async function insertElevationTx(
  trx: Knex.Transaction,
  elevation: { id: string; identityId: string; sessionId: string; tokenHash: Buffer; expiresAt: Date; now: Date },
): Promise<void> {
  await trx('identity.elevations').insert({
    id: elevation.id,
    identity_id: elevation.identityId,
    session_id: elevation.sessionId,
    token_hash: elevation.tokenHash,
    expires_at: elevation.expiresAt,
    created_at: elevation.now,
  })
}

/** A live elevation of this very session (step-up proof), by the SHA-256 of its token. */
export async function findLiveElevationTx(
  trx: Knex.Transaction,
  session: { sessionId: string; identityId: string },
  tokenHash: Buffer,
  now: Date,
): Promise<{ id: string } | undefined> {
  return await trx('identity.elevations')
    .where({ token_hash: tokenHash, session_id: session.sessionId, identity_id: session.identityId })
    .andWhere('expires_at', '>', now)
    .first<{ id: string } | undefined>('id')
}
