import { createHash, randomBytes } from 'node:crypto'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { sameSecret } from '../crypto/constant-time.ts'
import { requireElevationTx } from '../identity/elevation.ts'
import { NotFoundError, UnprocessableError } from '../identity/errors.ts'
import type { Channel } from '../outbox/constants.ts'
import {
  apiKeyListRows,
  changeApiKeyTx,
  createApiKeyTx,
  revokeApiKeyTx,
  selectApiKey,
  type ApiKeyChange,
  type ApiKeyRow,
} from './api-keys-sql.ts'
import type { StaffSession } from './outbox-admin.ts'

/** The purposes a courier key may be scoped to (mirrored by the CHECK on `platform.api_keys.purposes`). */
export const COURIER_PURPOSES = Object.freeze([
  'sign_up',
  'add_sign_in_method',
  'password_recovery',
  'step_up',
  'verification_code',
  'magic_link',
] as const)
export type CourierPurpose = (typeof COURIER_PURPOSES)[number]

/** What a key may do and how much: its scopes and its own limits. */
export type ApiKeyScope = {
  purposes: readonly CourierPurpose[]
  channels: readonly Channel[]
  requestsPerMinute: number
  perDestinationPerHour: number
  perDestinationPerDay: number
  /** What it may send in a clock hour, and to how many addresses it had not sent to within the hour; unset (a hook) = no such bound. */
  sendsPerHour?: number
  destinationsPerHour?: number
  /** The https origins its `magic_link` may point at (config/link-origins.ts); none = no magic link. */
  linkOrigins: readonly string[]
}

/**
 * An authenticated courier caller: the key's id and what it may do (adapters name their own).
 * `exactDestination`: its per-destination budget counts the exact address it named (the hooks:
 * their upstream owns its own anti-automation), not the canonical mailbox (`+tag` variants folded).
 */
export type CourierCaller = { apiKeyId: string; exactDestination?: boolean } & ApiKeyScope

// `sp_live_<id, 32 hex>_<secret, 32 random bytes base64url>`: the id finds the row, the secret is only ever hashed.
const KEY_FORMAT = /^sp_live_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/
const hashSecret = (secret: string): Buffer => createHash('sha256').update(secret).digest()
const idOf = (hex: string) => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
// Compared against when the key names no row, so a miss costs what a hit costs.
const DECOY_HASH = hashSecret(randomBytes(32).toString('base64url'))
const NO_KEY = '00000000-0000-0000-0000-000000000000'

function mintKey(): { id: string; key: string; secretHash: Buffer } {
  const id = uuidv7()
  const secret = randomBytes(32).toString('base64url')
  return { id, key: `sp_live_${id.replaceAll('-', '')}_${secret}`, secretHash: hashSecret(secret) }
}

/**
 * The caller a bearer key stands for, or undefined for a malformed, unknown or revoked key: the
 * three do the same work (one lookup, one hash, one timing-safe comparison) and the route answers
 * them with one 401, so a caller learns nothing about which it was.
 */
export async function authenticateApiKey(db: Knex, presented: string): Promise<CourierCaller | undefined> {
  const match = KEY_FORMAT.exec(presented)
  const row: ApiKeyRow | undefined = await selectApiKey(db, match ? idOf(match[1]!) : NO_KEY)
  const presentedHash = hashSecret(match?.[2] ?? presented)
  const same = sameSecret(presentedHash, row?.secret_hash ?? DECOY_HASH)
  // A hook's row (kind `hook`) is no key: its hash has no preimage, and it is refused here as well.
  if (!match || !row || !same || row.revoked_at !== null || row.kind !== 'key') return undefined
  return {
    apiKeyId: row.id,
    purposes: row.purposes as CourierPurpose[],
    channels: row.channels as Channel[],
    requestsPerMinute: row.requests_per_minute,
    perDestinationPerHour: row.per_destination_per_hour,
    perDestinationPerDay: row.per_destination_per_day,
    sendsPerHour: row.sends_per_hour,
    destinationsPerHour: row.destinations_per_hour,
    linkOrigins: row.link_origins,
  }
}

type StaffInput = { staff: StaffSession; elevationToken: string | undefined; now: Date }

/** A key scoped to `magic_link` must name where its links may point: without origins it could send none. */
function refuseLinkWithoutOrigins(purposes: readonly CourierPurpose[], linkOrigins: readonly string[]): void {
  if (purposes.includes('magic_link') && linkOrigins.length === 0)
    throw new UnprocessableError(
      'link_origins_required',
      'A key scoped to magic_link needs linkOrigins: the origins its links may point at.',
    )
}

/** `POST /platform-admin/api-keys` (fresh elevation, audited): the clear key is in this answer only. */
export async function createApiKey(db: Knex, input: StaffInput & { name: string } & ApiKeyScope): Promise<{ id: string; key: string }> {
  refuseLinkWithoutOrigins(input.purposes, input.linkOrigins)
  const minted = mintKey()
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    await createApiKeyTx(trx, input.staff.tokenHash, input.now, { ...input, id: minted.id, secretHash: minted.secretHash })
  })
  return { id: minted.id, key: minted.key }
}

/**
 * `POST /platform-admin/api-keys/{id}/rotation` (fresh elevation, audited): a new key with the old
 * one's name, scopes and limits, the old one revoked in the same transaction. No overlap: a
 * caller deploys the new key, then rotates, or rotates and retries its 401s with the new key;
 * an overlap would leave a leaked key working after staff acted on the leak.
 */
export async function rotateApiKey(db: Knex, input: StaffInput & { id: string }): Promise<{ id: string; key: string }> {
  const minted = mintKey()
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    try {
      await createApiKeyTx(trx, input.staff.tokenHash, input.now, { id: minted.id, secretHash: minted.secretHash, replaces: input.id })
    } catch (error) {
      if ((error as { code?: string }).code === 'P0002') throw new NotFoundError('api_key_not_found', 'There is no such live API key.')
      throw error
    }
  })
  return { id: minted.id, key: minted.key }
}

/** `DELETE /platform-admin/api-keys/{id}` (fresh elevation, audited): the key stops working at once. */
export async function revokeApiKey(db: Knex, input: StaffInput & { id: string }): Promise<void> {
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    if (!(await revokeApiKeyTx(trx, input.staff.tokenHash, input.now, input.id)))
      throw new NotFoundError('api_key_not_found', 'There is no such live API key.')
  })
}

/**
 * `POST /platform-admin/api-keys/{id}/changes` (fresh elevation, audited): a live key's hourly volume, new
 * addresses an hour and link origins, changed in place (the key itself stays). Refused for a hook
 * caller (not a key) as for an unknown or revoked id, and when it would leave a `magic_link` key
 * without origins.
 */
export async function changeApiKey(db: Knex, input: StaffInput & { id: string; change: ApiKeyChange }): Promise<void> {
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    const row = await selectApiKey(trx, input.id)
    if (!row || row.kind !== 'key' || row.revoked_at !== null)
      throw new NotFoundError('api_key_not_found', 'There is no such live API key.')
    refuseLinkWithoutOrigins(row.purposes as CourierPurpose[], input.change.linkOrigins ?? row.link_origins)
    if (!(await changeApiKeyTx(trx, input.staff.tokenHash, input.now, input.id, input.change)))
      throw new NotFoundError('api_key_not_found', 'There is no such live API key.')
  })
}

/** `GET /platform-admin/api-keys`: every key, newest first, without key material. */
export async function listApiKeys(db: Knex, input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date }) {
  const rows = await apiKeyListRows(db, input.staff.tokenHash, input.now)
  return {
    items: rows.map((row) => ({
      id: row.id,
      name: row.name,
      purposes: row.purposes,
      channels: row.channels,
      requestsPerMinute: row.requests_per_minute,
      perDestinationPerHour: row.per_destination_per_hour,
      perDestinationPerDay: row.per_destination_per_day,
      sendsPerHour: row.sends_per_hour,
      destinationsPerHour: row.destinations_per_hour,
      linkOrigins: row.link_origins,
      createdBy: row.created_by,
      createdAt: row.created_at.toISOString(),
      revokedAt: row.revoked_at?.toISOString() ?? null,
      lastUsedAt: row.last_used_at?.toISOString() ?? null,
      replaces: row.replaces,
    })),
  }
}
