import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { deleteTrustedDeviceTx, findTrustedDevice, insertTrustedDeviceTx } from './devices-sql.ts'
import type { Requester } from './requester.ts'
import { hashToken, newToken } from './secrets.ts'

/** How long a device cookie is honoured after the sign-in that set it. */
export const DEVICE_TRUST_DAYS = 90

/** A device cookie for the client that just signed in: the token goes to the client once; only its hash is stored. */
export type DeviceCookie = { token: string; expiresAt: Date }

/**
 * Trusts the client that just proved it is the identity (a sign-in, a confirmed sign-up): its own
 * budgets from now on. A client that presented a device of this identity gets it renewed under a
 * new token (the old row goes), so signing in again and again on one client never pushes the
 * owner's other devices out of the newest `DEVICES_PER_IDENTITY`.
 */
export async function trustDeviceTx(
  trx: Knex.Transaction,
  identityId: string,
  requester: Pick<Requester, 'device'>,
  now: Date,
): Promise<DeviceCookie> {
  if (requester.device?.identityId === identityId) await deleteTrustedDeviceTx(trx, requester.device.id, identityId)
  const { token, hash } = newToken()
  const expiresAt = new Date(now.getTime() + DEVICE_TRUST_DAYS * 86_400_000)
  await insertTrustedDeviceTx(trx, { id: uuidv7(), identityId, tokenHash: hash, expiresAt, now })
  return { token, expiresAt }
}

/**
 * The requester of a request: its client, and the device its cookie names when the cookie is
 * live. The lookup is made for every cookie, before anything is known of the identifier asked
 * about, so it costs the same whether or not that identifier has an account.
 */
export async function resolveRequester(db: Knex, client: string, deviceToken: string | undefined, now: Date): Promise<Requester> {
  if (deviceToken === undefined) return { client }
  const device = await findTrustedDevice(db, hashToken(deviceToken), now)
  return device ? { client, device } : { client }
}
