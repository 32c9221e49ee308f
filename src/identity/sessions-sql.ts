import type { Knex } from 'knex'

export type SessionRow = { id: string; identity_id: string; expires_at: Date }

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
  })
}

export async function findActiveSession(db: Knex, tokenHash: Buffer, now: Date): Promise<SessionRow | undefined> {
  return await db('identity.sessions as s')
    .join('identity.identities as i', 'i.id', 's.identity_id')
    .select('s.id', 's.identity_id', 's.expires_at')
    .where({ 's.token_hash': tokenHash, 'i.status': 'active' })
    .whereNull('s.revoked_at')
    .andWhere('s.expires_at', '>', now)
    .first()
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
