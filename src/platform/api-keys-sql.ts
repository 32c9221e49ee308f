import type { Knex } from 'knex'

/** What the web authenticates a courier request with: never the secret, only its SHA-256. */
export type ApiKeyRow = {
  id: string
  secret_hash: Buffer
  purposes: string[]
  channels: string[]
  requests_per_minute: number
  per_destination_per_hour: number
  per_destination_per_day: number
  sends_per_hour: number
  destinations_per_hour: number
  link_origins: string[]
  /**
   * `hook`: the row a hook adapter's messages are attributed to (migration 20261206004100), never a
   * key; its scope and limit columns above are NULL (20261206007100), so it is refused before any is read.
   */
  kind: 'key' | 'hook'
  revoked_at: Date | null
}

/** A key as staff see it (`platform.api_key_list`): no hash, no secret. */
export type ApiKeyListRow = Omit<ApiKeyRow, 'secret_hash' | 'kind'> & {
  name: string
  created_by: string
  created_at: Date
  last_used_at: Date | null
  replaces: string | null
}

/** A new key as `platform.create_api_key` takes it; with `replaces`, the scopes and limits are the replaced key's. */
export type NewApiKey = {
  id: string
  secretHash: Buffer
  name?: string
  purposes?: readonly string[]
  channels?: readonly string[]
  requestsPerMinute?: number
  perDestinationPerHour?: number
  perDestinationPerDay?: number
  sendsPerHour?: number
  destinationsPerHour?: number
  linkOrigins?: readonly string[]
  replaces?: string
}

/** What `platform.change_api_key` sets on a live key (unset members stay as they are). */
export type ApiKeyChange = { sendsPerHour?: number; destinationsPerHour?: number; linkOrigins?: readonly string[] }

/** The key an id names, whatever its state (the caller compares the hash and reads `revoked_at`). */
export async function selectApiKey(db: Knex, id: string): Promise<ApiKeyRow | undefined> {
  return await db('platform.api_keys')
    .where({ id })
    .first<ApiKeyRow | undefined>(
      'id',
      'secret_hash',
      'purposes',
      'channels',
      'requests_per_minute',
      'per_destination_per_hour',
      'per_destination_per_day',
      'sends_per_hour',
      'destinations_per_hour',
      'link_origins',
      'kind',
      'revoked_at',
    )
}

/** Marks a key used, at most once a minute (a write per request would be one row's hot spot). */
export async function touchApiKey(db: Knex, id: string, now: Date): Promise<void> {
  await db.raw('UPDATE platform.api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)', [
    now,
    id,
    new Date(now.getTime() - 60_000),
  ])
}

/** Creates (or, with `replaces`, rotates to) a key and audits it; the function checks the staff session. */
export async function createApiKeyTx(trx: Knex.Transaction, sessionHash: Buffer, now: Date, key: NewApiKey): Promise<void> {
  await trx.raw('SELECT platform.create_api_key(?, ?, ?::jsonb)', [
    sessionHash,
    now,
    JSON.stringify({
      id: key.id,
      secret_hash: key.secretHash.toString('hex'),
      name: key.name,
      purposes: key.purposes,
      channels: key.channels,
      requests_per_minute: key.requestsPerMinute,
      per_destination_per_hour: key.perDestinationPerHour,
      per_destination_per_day: key.perDestinationPerDay,
      sends_per_hour: key.sendsPerHour,
      destinations_per_hour: key.destinationsPerHour,
      link_origins: key.linkOrigins,
      replaces: key.replaces,
    }),
  ])
}

/** Revokes a live key and audits it; false when no live key has this id. */
export async function revokeApiKeyTx(trx: Knex.Transaction, sessionHash: Buffer, now: Date, id: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: { revoked: boolean }[] }>('SELECT platform.revoke_api_key(?, ?, ?) AS revoked', [
    sessionHash,
    now,
    id,
  ])
  return rows[0]?.revoked === true
}

/** Every key, newest first (at most 500), for staff. */
export async function apiKeyListRows(db: Knex, sessionHash: Buffer, now: Date): Promise<ApiKeyListRow[]> {
  const { rows } = await db.raw<{ rows: ApiKeyListRow[] }>('SELECT * FROM platform.api_key_list(?, ?)', [sessionHash, now])
  return rows
}

/** Counts one request of a key in its current minute: undefined while under `max`, else the seconds until the next minute. */
export async function spendApiKeyRequest(db: Knex, id: string, now: Date, max: number): Promise<number | undefined> {
  const { rows } = await db.raw<{ rows: { wait: number | null }[] }>('SELECT platform.spend_api_key_request(?, ?, ?) AS wait', [
    id,
    now,
    max,
  ])
  return rows[0]?.wait ?? undefined
}

/** Sets a live key's budgets and link origins and audits it; false when no live key (of kind `key`) has this id. */
export async function changeApiKeyTx(
  trx: Knex.Transaction,
  sessionHash: Buffer,
  now: Date,
  id: string,
  change: ApiKeyChange,
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: { changed: boolean }[] }>('SELECT platform.change_api_key(?, ?, ?, ?::jsonb) AS changed', [
    sessionHash,
    now,
    id,
    JSON.stringify({
      sends_per_hour: change.sendsPerHour,
      destinations_per_hour: change.destinationsPerHour,
      link_origins: change.linkOrigins,
    }),
  ])
  return rows[0]?.changed === true
}

/**
 * Counts one send of a key in its clock hour, and one new address with `newDestination`: undefined
 * while both fit under the key's budgets, else the seconds until the next hour (nothing counted).
 * In the caller's transaction: a send it rolls back is not counted.
 */
export async function spendApiKeyHourTx(
  trx: Knex.Transaction,
  id: string,
  now: Date,
  budget: { sendsPerHour: number; destinationsPerHour: number; newDestination: boolean },
): Promise<number | undefined> {
  const { rows } = await trx.raw<{ rows: { wait: number | null }[] }>('SELECT platform.spend_api_key_hour(?, ?, ?, ?, ?) AS wait', [
    id,
    now,
    budget.sendsPerHour,
    budget.destinationsPerHour,
    budget.newDestination,
  ])
  return rows[0]?.wait ?? undefined
}
