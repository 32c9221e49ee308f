import type { Knex } from 'knex'
import type { Identifier } from './identifiers.ts'

export type VerifiedIdentifierRow = { login_identifier_id: string; identity_id: string }

/** A verified identifier of an active identity, the only kind a code may be sent to. */
export async function findVerifiedIdentifierTx(trx: Knex.Transaction, identifier: Identifier): Promise<VerifiedIdentifierRow | undefined> {
  return await trx('identity.login_identifiers as li')
    .join('identity.identities as i', 'i.id', 'li.identity_id')
    .select('li.id as login_identifier_id', 'li.identity_id')
    .where({ 'li.kind': identifier.kind, 'li.value': identifier.value, 'i.status': 'active' })
    .whereNotNull('li.verified_at')
    .first()
}

export async function insertActiveIdentityTx(
  trx: Knex.Transaction,
  ids: { identityId: string; loginIdentifierId: string },
  identifier: Identifier,
  now: Date,
): Promise<void> {
  await trx('identity.identities').insert({ id: ids.identityId, status: 'active', created_at: now })
  await trx('identity.login_identifiers').insert({
    id: ids.loginIdentifierId,
    identity_id: ids.identityId,
    kind: identifier.kind,
    value: identifier.value,
    verified_at: now,
    created_at: now,
  })
}
