import type { Knex } from 'knex'
import type { Identifier } from '../identity/identifiers.ts'
import { findIdentityOfVerifiedIdentifierTx } from '../identity/identities-sql.ts'
import { grantStaffTx, insertAuditRecordTx, lockStaffMemberTx, revokeStaffTx } from './staff-sql.ts'

export { isActiveStaff } from './staff-sql.ts'

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
    const identityId = await findIdentityOfVerifiedIdentifierTx(trx, identifier)
    if (!identityId) return 'no_such_identity'
    const current = await lockStaffMemberTx(trx, identityId)
    const active = current !== undefined && current.revoked_at === null
    if ((action === 'grant') === active) return 'unchanged'
    if (action === 'grant') await grantStaffTx(trx, identityId, now)
    else await revokeStaffTx(trx, identityId, now)
    await insertAuditRecordTx(trx, { actor, action: `staff.${action}`, subject: identityId }, now)
    return action === 'grant' ? 'granted' : 'revoked'
  })
}
