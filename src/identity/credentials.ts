import type { Knex } from 'knex'
import { lockPasswordHashTx, setPasswordTx, swapPasswordTx } from './identities-sql.ts'
import { deleteDevicesOfIdentityTx } from './devices-sql.ts'
import { revokeAllSessionsTx } from './sessions-sql.ts'

/**
 * Whether `verifiedHash`, the hash a password was checked against outside any transaction (argon2
 * is too slow to hold a lock through), is still the identity's password. Argon2 salts every hash,
 * so any change of the password — even to the same one — changes the hash: comparing it is the
 * credential's generation, with nothing for a new kind of change to forget to bump (nor for the
 * previous release to leave unbumped while both run). The row stays share-locked to the caller's
 * COMMIT, so a session inserted after a true answer either commits before a concurrent
 * `replacePasswordTx` revokes every session, or the answer is false.
 */
export async function isCurrentPasswordTx(trx: Knex.Transaction, identityId: string, verifiedHash: string | undefined): Promise<boolean> {
  if (verifiedHash === undefined) return false
  return (await lockPasswordHashTx(trx, identityId)) === verifiedHash
}

/**
 * Sets a new password, revokes every session of the identity opened with the old one (all but
 * `keepSessionId`, the caller's own, when it proved the old password just now) and forgets its
 * trusted devices. With `replacing`,
 * only while that hash is still the password (false, nothing written, when a concurrent change came
 * first). The password row is written first: its row lock makes a sign-in that verified the old
 * password wait (and then see a new hash, `isCurrentPasswordTx`) or be waited for (and then be
 * revoked here).
 */
export async function replacePasswordTx(
  trx: Knex.Transaction,
  input: { identityId: string; passwordHash: string; now: Date; keepSessionId?: string; replacing?: string },
): Promise<boolean> {
  if (input.replacing === undefined) await setPasswordTx(trx, input.identityId, input.passwordHash, input.now)
  else if (!(await swapPasswordTx(trx, input.identityId, input.replacing, input.passwordHash, input.now))) return false
  await revokeAllSessionsTx(trx, input.identityId, input.now, input.keepSessionId)
  // A device was trusted by proving the old password: whoever did (a thief too) must prove the new one.
  await deleteDevicesOfIdentityTx(trx, input.identityId)
  return true
}
