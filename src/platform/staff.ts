import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import type { Identifier } from '../identity/identifiers.ts'

/** Appends one audit record in the caller's transaction: who, what, to which subject; never a secret. */
export async function auditTx(
  trx: Knex.Transaction,
  record: { actor: string; action: string; subject?: string; details?: Record<string, unknown> },
  now: Date,
): Promise<void> {
  await trx('platform.audit_records').insert({
    id: uuidv7(),
    at: now,
    actor: record.actor,
    action: record.action,
    subject: record.subject ?? null,
    details: record.details ?? {},
  })
}

export type StaffChange = 'granted' | 'revoked' | 'unchanged' | 'no_such_identity'

/**
 * `npm run staff -- grant|revoke <identifier>` (run as the owner): makes the identity behind a
 * verified identifier staff, or revokes it, with an audit record naming the operator's login.
 */
export async function changeStaff(
  db: Knex,
  action: 'grant' | 'revoke',
  identifier: Identifier,
  actor: string,
  now: Date,
): Promise<StaffChange> {
  return await db.transaction(async (trx) => {
    const login = await trx('identity.login_identifiers')
      .where({ kind: identifier.kind, value: identifier.value })
      .whereNotNull('verified_at')
      .first<{ identity_id: string } | undefined>('identity_id')
    if (!login) return 'no_such_identity'
    const current = await trx('platform.staff_members')
      .where({ identity_id: login.identity_id })
      .forUpdate()
      .first<{ revoked_at: Date | null } | undefined>('revoked_at')
    const active = current !== undefined && current.revoked_at === null
    if ((action === 'grant') === active) return 'unchanged'
    if (action === 'grant') {
      await trx('platform.staff_members')
        .insert({ identity_id: login.identity_id, granted_at: now, revoked_at: null })
        .onConflict('identity_id')
        .merge()
    } else {
      await trx('platform.staff_members').where({ identity_id: login.identity_id }).update({ revoked_at: now })
    }
    await auditTx(trx, { actor, action: `staff.${action}`, subject: login.identity_id }, now)
    return action === 'grant' ? 'granted' : 'revoked'
  })
}

export async function isActiveStaff(db: Knex, identityId: string): Promise<boolean> {
  const row = await db('platform.staff_members').where({ identity_id: identityId }).whereNull('revoked_at').first('identity_id')
  return row !== undefined
}
