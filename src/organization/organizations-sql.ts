import type { Knex } from 'knex'

/** A new organization with its creator as its first admin. */
export async function insertOrganizationTx(
  trx: Knex.Transaction,
  organization: { id: string; name: string; createdBy: string },
  now: Date,
): Promise<void> {
  await trx('organization.organizations').insert({
    id: organization.id,
    name: organization.name,
    created_by: organization.createdBy,
    created_at: now,
  })
  await trx('organization.memberships').insert({ organization_id: organization.id, identity_id: organization.createdBy, role: 'admin' })
}

/**
 * Locks the organization for this transaction if the identity is one of its admins; false when
 * the organization does not exist or the identity is no admin of it (one answer for both).
 */
export async function lockOrganizationOfAdminTx(trx: Knex.Transaction, organizationId: string, identityId: string): Promise<boolean> {
  const row = await trx('organization.organizations as o')
    .join('organization.memberships as m', 'm.organization_id', 'o.id')
    .where({ 'o.id': organizationId, 'm.identity_id': identityId, 'm.role': 'admin' })
    .forUpdate('o')
    .first('o.id')
  return row !== undefined
}

/** Makes the identity a member; a member already stays as they are. */
export async function insertMemberTx(trx: Knex.Transaction, organizationId: string, identityId: string): Promise<void> {
  await trx('organization.memberships')
    .insert({ organization_id: organizationId, identity_id: identityId, role: 'member' })
    .onConflict(['organization_id', 'identity_id'])
    .ignore()
}
