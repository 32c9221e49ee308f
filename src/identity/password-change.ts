import type { Knex } from 'knex'
import { limitIdentityTx, type ChallengeDeps } from './challenges.ts'
import { replacePasswordTx } from './credentials.ts'
import { requireElevationTx } from './elevation.ts'
import { ForbiddenError } from './errors.ts'
import { findPasswordHash, findPrimaryIdentifierTx } from './identities-sql.ts'
import { trustDeviceTx, type DeviceCookie } from './devices.ts'
import type { AcceptedPassword } from './password-policy.ts'
import { hashPassword, verifyPassword } from './secrets.ts'
import { notifyOtherIdentifiersTx } from './security-notices.ts'
import type { SessionContext } from './sessions.ts'

/** Password changes (right or wrong current password) one identity may try in an hour. */
export const PASSWORD_CHANGES_PER_HOUR = 5

/**
 * POST /password-changes: the current password and a fresh step-up of this session (a stolen
 * bearer token alone can neither guess the password here nor lock the owner out with a new one).
 * Sets the new password, revokes every other session of the identity (any opened with the old
 * password, by whoever knew it) and sends a security notice to every verified identifier. A wrong
 * current password is refused (403 `wrong_password`) and counts against the hourly budget like a
 * right one.
 */
export async function changePassword(
  db: Knex,
  deps: ChallengeDeps,
  session: SessionContext,
  input: { currentPassword: string; newPassword: AcceptedPassword; elevationToken: string | undefined },
): Promise<DeviceCookie> {
  // Argon2 runs before any lock is taken; the swap below commits only if the hash checked is still the password.
  const currentHash = await findPasswordHash(db, session.identityId)
  const [matches, passwordHash] = await Promise.all([verifyPassword(currentHash, input.currentPassword), hashPassword(input.newPassword)])
  const changed = await db.transaction(async (trx) => {
    const now = deps.clock()
    await requireElevationTx(trx, session, input.elevationToken, now)
    await limitIdentityTx(trx, deps, 'password_change', session.identityId, PASSWORD_CHANGES_PER_HOUR, now)
    if (!matches || currentHash === undefined) return undefined
    const replaced = await replacePasswordTx(trx, {
      identityId: session.identityId,
      passwordHash,
      now,
      keepSessionId: session.sessionId,
      replacing: currentHash,
    })
    if (!replaced) return undefined
    const primary = await findPrimaryIdentifierTx(trx, session.identityId)
    if (primary)
      await notifyOtherIdentifiersTx(trx, deps, { identityId: session.identityId, event: 'password_changed', identifier: primary, now })
    // Every device was forgotten with the old password; this client just proved the new one's owner.
    return await trustDeviceTx(trx, session.identityId, {}, now)
  })
  if (!changed) throw new ForbiddenError('wrong_password', 'The current password is wrong.')
  return changed
}
