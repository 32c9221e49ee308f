import type { Knex } from 'knex'

const INVITATIONS = 'organization.invitations'

export type InvitationRow = { id: string; organization_id: string; email: string; status: string; expires_at: Date }

/** The pending invitation of an address to an organization, locked for this transaction. */
export async function lockPendingInvitationOfAddressTx(
  trx: Knex.Transaction,
  organizationId: string,
  email: string,
): Promise<string | undefined> {
  const row = await trx(INVITATIONS)
    .where({ organization_id: organizationId, email, status: 'pending' })
    .forUpdate()
    .first<{ id: string } | undefined>('id')
  return row?.id
}

/** How many invitations of an organization are pending and unexpired. */
export async function countPendingInvitationsTx(trx: Knex.Transaction, organizationId: string, now: Date): Promise<number> {
  const rows = await trx(INVITATIONS)
    .where({ organization_id: organizationId, status: 'pending' })
    .andWhere('expires_at', '>', now)
    .count<{ count: number }[]>({ count: '*' })
  return Number(rows[0]!.count)
}

/** A new pending invitation; only the token's hash is stored. */
export async function insertInvitationTx(
  trx: Knex.Transaction,
  invitation: { id: string; organizationId: string; email: string; tokenHash: Buffer; invitedBy: string; expiresAt: Date },
  now: Date,
): Promise<void> {
  await trx(INVITATIONS).insert({
    id: invitation.id,
    organization_id: invitation.organizationId,
    email: invitation.email,
    token_hash: invitation.tokenHash,
    invited_by: invitation.invitedBy,
    expires_at: invitation.expiresAt,
    created_at: now,
  })
}

export async function markInvitationRevokedTx(trx: Knex.Transaction, id: string, now: Date): Promise<void> {
  await trx(INVITATIONS).where({ id }).update({ status: 'revoked', revoked_at: now })
}

/** An invitation of the organization, locked for this transaction; its status only. */
export async function lockInvitationStatusTx(trx: Knex.Transaction, organizationId: string, id: string): Promise<string | undefined> {
  const row = await trx(INVITATIONS)
    .where({ id, organization_id: organizationId })
    .forUpdate()
    .first<{ status: string } | undefined>('status')
  return row?.status
}

/** The invitation a token's hash names, whatever its status, locked for this transaction. */
export async function lockInvitationByTokenHashTx(trx: Knex.Transaction, tokenHash: Buffer): Promise<InvitationRow | undefined> {
  return await trx(INVITATIONS)
    .where({ token_hash: tokenHash })
    .forUpdate()
    .first<InvitationRow | undefined>('id', 'organization_id', 'email', 'status', 'expires_at')
}

export async function markInvitationAcceptedTx(trx: Knex.Transaction, id: string, acceptedBy: string, now: Date): Promise<void> {
  await trx(INVITATIONS).where({ id }).update({ status: 'accepted', accepted_by: acceptedBy, accepted_at: now })
}
