import type { Knex } from 'knex'
import type { TrustedDevice } from './requester.ts'

const DEVICES = 'identity.trusted_devices'

/** Live devices one identity keeps; signing in on a further one forgets its oldest. */
export const DEVICES_PER_IDENTITY = 20

/** The live device whose cookie token hashes to `tokenHash`, whatever identity it signed in as. */
export async function findTrustedDevice(db: Knex, tokenHash: Buffer, now: Date): Promise<TrustedDevice | undefined> {
  const row = await db(DEVICES)
    .where({ token_hash: tokenHash })
    .andWhere('expires_at', '>', now)
    .first<{ id: string; identity_id: string } | undefined>('id', 'identity_id')
  return row && { id: row.id, identityId: row.identity_id }
}

/**
 * Records a device of the identity and, in the same transaction, forgets its expired ones and all
 * but its newest `DEVICES_PER_IDENTITY`: the table's retention, held as it is written.
 */
export async function insertTrustedDeviceTx(
  trx: Knex.Transaction,
  device: { id: string; identityId: string; tokenHash: Buffer; expiresAt: Date; now: Date },
): Promise<void> {
  await trx(DEVICES).insert({
    id: device.id,
    identity_id: device.identityId,
    token_hash: device.tokenHash,
    created_at: device.now,
    expires_at: device.expiresAt,
  })
  await trx.raw(
    `DELETE FROM ${DEVICES} WHERE identity_id = ? AND id NOT IN (
       SELECT id FROM ${DEVICES} WHERE identity_id = ? AND expires_at > ? ORDER BY created_at DESC, id DESC LIMIT ?)`,
    [device.identityId, device.identityId, device.now, DEVICES_PER_IDENTITY],
  )
}

/** Forgets one device of the identity (the one a client presented as it signed in again). */
export async function deleteTrustedDeviceTx(trx: Knex.Transaction, id: string, identityId: string): Promise<void> {
  await trx(DEVICES).where({ id, identity_id: identityId }).delete()
}

/** Forgets every device of the identity: its credential changed, or it signed out everywhere. */
export async function deleteDevicesOfIdentityTx(trx: Knex.Transaction, identityId: string): Promise<void> {
  await trx(DEVICES).where({ identity_id: identityId }).delete()
}
