import type { Knex } from 'knex'
import type { ChallengePurpose } from '../outbox/constants.ts'
import { openChallengeIdOfLoginIdentifier } from './challenges-sql.ts'
import { ConflictError } from './errors.ts'
import type { Identifier } from './identifiers.ts'

export type VerifiedIdentifierRow = { login_identifier_id: string; identity_id: string }
export type ClaimRow = { login_identifier_id: string; identity_id: string; verified_at: Date | null; identity_status: string }

/** The verified identifiers of active identities that are `identifier` (there is at most one). */
function verifiedIdentifier(db: Knex.Transaction | Knex, identifier: Identifier) {
  return db('identity.login_identifiers as li')
    .join('identity.identities as i', 'i.id', 'li.identity_id')
    .select('li.id as login_identifier_id', 'li.identity_id')
    .where({ 'li.kind': identifier.kind, 'li.value': identifier.value, 'i.status': 'active' })
    .whereNotNull('li.verified_at')
}

/** A verified identifier of an active identity, the only kind a recovery code may be sent to. */
export async function findVerifiedIdentifier(
  trx: Knex.Transaction | Knex,
  identifier: Identifier,
): Promise<VerifiedIdentifierRow | undefined> {
  return await verifiedIdentifier(trx, identifier).first<VerifiedIdentifierRow | undefined>()
}

/**
 * The verified identifier of an active identity, with the id of its open challenge for `purpose`
 * (unlocked: `issueHidden` binds a resend's code hash to it), in one statement.
 */
export async function findVerifiedIdentifierWithOpenChallenge(
  trx: Knex | Knex.Transaction,
  identifier: Identifier,
  purpose: ChallengePurpose,
  now: Date,
): Promise<(VerifiedIdentifierRow & { open_challenge_id: string | null }) | undefined> {
  return await verifiedIdentifier(trx, identifier)
    .select(openChallengeIdOfLoginIdentifier(trx, purpose, now).as('open_challenge_id'))
    .first<(VerifiedIdentifierRow & { open_challenge_id: string | null }) | undefined>()
}

/** Every identity's claim on an identifier, verified or not. */
export async function findClaims(trx: Knex.Transaction | Knex, identifier: Identifier): Promise<ClaimRow[]> {
  return await trx('identity.login_identifiers as li')
    .join('identity.identities as i', 'i.id', 'li.identity_id')
    .select('li.id as login_identifier_id', 'li.identity_id', 'li.verified_at', 'i.status as identity_status')
    .where({ 'li.kind': identifier.kind, 'li.value': identifier.value })
}

/**
 * A new identity and its claim on an identifier in one statement: the claim's foreign key is
 * checked at the end of the statement, when the identity row is there.
 */
export async function insertIdentityWithClaimTx(
  trx: Knex.Transaction,
  ids: { identityId: string; loginIdentifierId: string },
  status: 'pending' | 'active',
  identifier: Identifier,
  verifiedAt: Date | null,
  now: Date,
): Promise<void> {
  await trx.raw(
    `WITH identity AS (INSERT INTO identity.identities (id, status, created_at) VALUES (?, ?, ?))
     INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
    [ids.identityId, status, now, ids.loginIdentifierId, ids.identityId, identifier.kind, identifier.value, verifiedAt, now],
  )
}

export async function insertClaimTx(
  trx: Knex.Transaction,
  id: string,
  identityId: string,
  identifier: Identifier,
  verifiedAt: Date | null,
  now: Date,
): Promise<void> {
  await trx('identity.login_identifiers').insert({
    id,
    identity_id: identityId,
    kind: identifier.kind,
    value: identifier.value,
    verified_at: verifiedAt,
    created_at: now,
  })
}

export async function insertActiveIdentityTx(
  trx: Knex.Transaction,
  ids: { identityId: string; loginIdentifierId: string },
  identifier: Identifier,
  now: Date,
): Promise<void> {
  await insertIdentityWithClaimTx(trx, ids, 'active', identifier, now, now)
}

export async function activateIdentityTx(trx: Knex.Transaction, identityId: string): Promise<void> {
  await trx('identity.identities').where({ id: identityId }).update({ status: 'active' })
}

/** Verifies a claim; refused with 409 `identifier_taken` when another identity verified the same identifier first. */
export async function verifyClaimTx(trx: Knex.Transaction, loginIdentifierId: string, now: Date): Promise<void> {
  try {
    await trx('identity.login_identifiers').where({ id: loginIdentifierId }).update({ verified_at: now })
  } catch (error) {
    if ((error as { code?: string }).code === '23505')
      throw new ConflictError('identifier_taken', 'Another account verified this identifier first.')
    throw error
  }
}

export async function setPasswordTx(trx: Knex.Transaction, identityId: string, passwordHash: string, now: Date): Promise<void> {
  await trx.raw(
    `INSERT INTO identity.password_credentials (identity_id, password_hash, updated_at) VALUES (?, ?, ?)
     ON CONFLICT (identity_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = EXCLUDED.updated_at`,
    [identityId, passwordHash, now],
  )
}

/**
 * Replaces the password only while `expectedHash` is still it (a compare-and-set: a concurrent
 * change waits on the row and is then seen); false when it was not.
 */
export async function swapPasswordTx(
  trx: Knex.Transaction,
  identityId: string,
  expectedHash: string,
  passwordHash: string,
  now: Date,
): Promise<boolean> {
  const updated = await trx('identity.password_credentials')
    .where({ identity_id: identityId, password_hash: expectedHash })
    .update({ password_hash: passwordHash, updated_at: now })
  return updated === 1
}

export async function findPasswordHash(trx: Knex.Transaction | Knex, identityId: string): Promise<string | undefined> {
  const row = await trx('identity.password_credentials')
    .select('password_hash')
    .where({ identity_id: identityId })
    .first<{ password_hash: string } | undefined>()
  return row?.password_hash
}

/**
 * The identity's password hash, row-locked FOR SHARE until the caller's COMMIT: a concurrent
 * change of the password (an UPDATE of the row) waits for that COMMIT, or this read waits for the
 * change's and returns the new hash.
 */
export async function lockPasswordHashTx(trx: Knex.Transaction, identityId: string): Promise<string | undefined> {
  const row = await trx('identity.password_credentials')
    .select('password_hash')
    .where({ identity_id: identityId })
    .forShare()
    .first<{ password_hash: string } | undefined>()
  return row?.password_hash
}

/**
 * The identity's primary identifier: the first it verified (the one it signed up with, or the
 * oldest left). Step-up codes go there and nowhere else, so an identifier added later — by the
 * owner or by whoever once got past a step-up — never receives them; it cannot be removed.
 */
export async function findPrimaryIdentifierTx(
  trx: Knex.Transaction,
  identityId: string,
): Promise<(Identifier & { id: string }) | undefined> {
  return await trx('identity.login_identifiers')
    .select('id', 'kind', 'value')
    .where({ identity_id: identityId })
    .whereNotNull('verified_at')
    .orderBy([
      { column: 'verified_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ])
    .first()
}

/**
 * A verified identifier stops being a sign-in method: it becomes the identity's unverified claim
 * again (its challenges keep their row to point at; adding it back is the add flow), so it neither
 * signs in nor blocks another identity from verifying it.
 */
export async function unverifyIdentifierTx(trx: Knex.Transaction, loginIdentifierId: string): Promise<void> {
  await trx('identity.login_identifiers').where({ id: loginIdentifierId }).update({ verified_at: null })
}

/** Every verified identifier of an identity (where security notices go). */
export async function findVerifiedIdentifiersTx(trx: Knex.Transaction, identityId: string): Promise<(Identifier & { id: string })[]> {
  return await trx('identity.login_identifiers')
    .select('id', 'kind', 'value')
    .where({ identity_id: identityId })
    .whereNotNull('verified_at')
    .orderBy('verified_at', 'asc')
}

/** The identity holding `identifier` as a verified identifier, whatever the identity's status (staff grants name it). */
export async function findIdentityOfVerifiedIdentifierTx(trx: Knex.Transaction, identifier: Identifier): Promise<string | undefined> {
  const row = await trx('identity.login_identifiers')
    .where({ kind: identifier.kind, value: identifier.value })
    .whereNotNull('verified_at')
    .first<{ identity_id: string } | undefined>('identity_id')
  return row?.identity_id
}

/** Whether the identity holds `identifier` as a verified identifier of its own. */
export async function holdsVerifiedIdentifierTx(trx: Knex.Transaction, identityId: string, identifier: Identifier): Promise<boolean> {
  const row = await trx('identity.login_identifiers')
    .where({ identity_id: identityId, kind: identifier.kind, value: identifier.value })
    .whereNotNull('verified_at')
    .first('id')
  return row !== undefined
}

/**
 * Serializes the sign-ups of one identifier until this transaction ends (an advisory lock on its
 * name: there may be no row to lock yet).
 */
export async function lockIdentifierForSignUpTx(trx: Knex.Transaction, identifier: Identifier): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`sign-up:${identifier.kind}:${identifier.value}`])
}
