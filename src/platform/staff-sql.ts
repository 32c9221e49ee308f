import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'

export type AuditRecord = { actor: string; action: string; subject?: string; details?: Record<string, unknown> }

/** Appends one audit record in the caller's transaction: who, what, to which subject; never a secret. */
export async function insertAuditRecordTx(trx: Knex.Transaction, record: AuditRecord, now: Date): Promise<void> {
  await trx('platform.audit_records').insert({
    id: uuidv7(),
    at: now,
    actor: record.actor,
    action: record.action,
    subject: record.subject ?? null,
    details: record.details ?? {},
  })
}

/** The identity's staff membership, locked for this transaction: undefined when it never had one. */
export async function lockStaffMemberTx(trx: Knex.Transaction, identityId: string): Promise<{ revoked_at: Date | null } | undefined> {
  return await trx('platform.staff_members')
    .where({ identity_id: identityId })
    .forUpdate()
    .first<{ revoked_at: Date | null } | undefined>('revoked_at')
}

/** Makes the identity staff, a revoked membership granted anew. */
export async function grantStaffTx(trx: Knex.Transaction, identityId: string, now: Date): Promise<void> {
  await trx('platform.staff_members')
    .insert({ identity_id: identityId, granted_at: now, revoked_at: null })
    .onConflict('identity_id')
    .merge()
}

export async function revokeStaffTx(trx: Knex.Transaction, identityId: string, now: Date): Promise<void> {
  await trx('platform.staff_members').where({ identity_id: identityId }).update({ revoked_at: now })
}

export async function isActiveStaff(db: Knex, identityId: string): Promise<boolean> {
  const row = await db('platform.staff_members').where({ identity_id: identityId }).whereNull('revoked_at').first('identity_id')
  return row !== undefined
}
