import type { Knex } from 'knex'
import type { Identifier } from '../identity/identifiers.ts'

type IdentifierKind = Identifier['kind']

/**
 * The statements of per-person erasure and export (docs/privacy.md). The changes themselves are
 * SECURITY DEFINER functions (migration 20261202001501): the web role holds no DELETE on the
 * tables they empty. The `*Core` calls need the owner (the CLI); the others a live staff session.
 */

/**
 * The identity behind an identifier, its verified owner first (an unconfirmed claim on the same
 * address may belong to someone else), with its identifiers and devices.
 */
export async function findPerson(
  db: Knex,
  identifier: { kind: IdentifierKind; value: string },
): Promise<
  | { identityId: string; identifiers: { id: string; kind: IdentifierKind; value: string; verified: boolean }[]; deviceIds: string[] }
  | undefined
> {
  const found = await db('identity.login_identifiers')
    .where(identifier)
    .orderByRaw('verified_at IS NULL, created_at')
    .first<{ identity_id: string } | undefined>('identity_id')
  if (!found) return undefined
  const identifiers = await db('identity.login_identifiers')
    .where({ identity_id: found.identity_id })
    .select<{ id: string; kind: IdentifierKind; value: string; verified: boolean }[]>(
      'id',
      'kind',
      'value',
      db.raw('verified_at IS NOT NULL AS verified'),
    )
  const devices = await db('identity.trusted_devices').where({ identity_id: found.identity_id }).select<{ id: string }[]>('id')
  return { identityId: found.identity_id, identifiers, deviceIds: devices.map((device) => device.id) }
}

/** What `platform.erase_person*` return: the tombstone and the counts, or a refusal; null when the identity is gone. */
export type ErasureRow =
  { tombstoneId: string; erased: Record<string, number> } | { refusal: 'own_identity' | 'staff_member' | 'sole_admin' } | null

export type ErasureInput = { identityId: string; destinationHmacs: Buffer[]; bucketKeys: Buffer[]; now: Date }

/** Erases as staff, in the caller's transaction; the function checks the session and names its staff member as the actor. */
export async function erasePersonTx(trx: Knex.Transaction, sessionTokenHash: Buffer, input: ErasureInput): Promise<ErasureRow> {
  const { rows } = await trx.raw<{ rows: { erased: ErasureRow }[] }>('SELECT platform.erase_person(?, ?, ?, ?, ?) AS erased', [
    sessionTokenHash,
    input.now,
    input.identityId,
    input.destinationHmacs,
    input.bucketKeys,
  ])
  return rows[0]!.erased
}

/** Erases as the owner (the CLI), the operator's login as the actor. */
export async function erasePersonCore(db: Knex, actor: string, input: ErasureInput): Promise<ErasureRow> {
  const { rows } = await db.raw<{ rows: { erased: ErasureRow }[] }>('SELECT platform.erase_person_core(?, ?, ?, ?, ?) AS erased', [
    input.identityId,
    input.destinationHmacs,
    input.bucketKeys,
    actor,
    input.now,
  ])
  return rows[0]!.erased
}

/** Everything held about a person (no hash, token or envelope), audited as `identity.exported`; null when the identity is gone. */
export async function exportPersonTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  input: { identityId: string; destinationHmacs: Buffer[]; now: Date },
): Promise<Record<string, unknown> | null> {
  const { rows } = await trx.raw<{ rows: { export: Record<string, unknown> | null }[] }>(
    'SELECT platform.export_person(?, ?, ?, ?) AS export',
    [sessionTokenHash, input.now, input.identityId, input.destinationHmacs],
  )
  return rows[0]!.export
}

/** The export as the owner (the CLI); the CLI writes its own audit record. */
export async function exportPersonCore(
  db: Knex,
  input: { identityId: string; destinationHmacs: Buffer[] },
): Promise<Record<string, unknown> | null> {
  const { rows } = await db.raw<{ rows: { export: Record<string, unknown> | null }[] }>(
    'SELECT platform.export_person_core(?, ?) AS export',
    [input.identityId, input.destinationHmacs],
  )
  return rows[0]!.export
}
