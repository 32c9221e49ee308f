import type { Knex } from 'knex'

/**
 * The staff functions of migration 20261202002700: each checks the staff session from the SHA-256
 * of its token itself (42501 otherwise); the writes are audited in the caller's transaction.
 */
export async function createWebhookEndpointTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  now: Date,
  endpoint: { id: string; url: string; events: readonly string[]; secretEnvelope: string },
): Promise<void> {
  await trx.raw('SELECT platform.create_webhook_endpoint(?, ?, ?, ?, ?::text[], ?)', [
    sessionTokenHash,
    now,
    endpoint.id,
    endpoint.url,
    endpoint.events as string[],
    endpoint.secretEnvelope,
  ])
}

/** One row of `platform.webhook_endpoint_list`. */
export type WebhookEndpointRow = {
  id: string
  url: string
  events: string[]
  created_at: Date
  disabled_at: Date | null
  pending: string
  dead_lettered: string
}

export async function webhookEndpointRows(db: Knex, sessionTokenHash: Buffer, now: Date): Promise<WebhookEndpointRow[]> {
  const { rows } = await db.raw<{ rows: WebhookEndpointRow[] }>('SELECT * FROM platform.webhook_endpoint_list(?, ?)', [
    sessionTokenHash,
    now,
  ])
  return rows
}

/** False when there is no such endpoint (disabling a disabled one is true and changes nothing). */
export async function disableWebhookEndpointTx(trx: Knex.Transaction, sessionTokenHash: Buffer, now: Date, id: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: { done: boolean }[] }>('SELECT platform.disable_webhook_endpoint(?, ?, ?) AS done', [
    sessionTokenHash,
    now,
    id,
  ])
  return rows[0]?.done === true
}

/** The URL of an enabled endpoint (its secret's seal is bound to it), or undefined. */
export async function webhookEndpointUrlTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  now: Date,
  id: string,
): Promise<string | undefined> {
  const { rows } = await trx.raw<{ rows: { url: string | null }[] }>('SELECT platform.webhook_endpoint_url(?, ?, ?) AS url', [
    sessionTokenHash,
    now,
    id,
  ])
  return rows[0]?.url ?? undefined
}

/** False when there is no such enabled endpoint. */
export async function rotateWebhookSecretTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  now: Date,
  rotation: { id: string; secretEnvelope: string; previousUntil: Date },
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: { done: boolean }[] }>('SELECT platform.rotate_webhook_secret(?, ?, ?, ?, ?) AS done', [
    sessionTokenHash,
    now,
    rotation.id,
    rotation.secretEnvelope,
    rotation.previousUntil,
  ])
  return rows[0]?.done === true
}

/** One row of `platform.webhook_delivery_page`: no payload, only what happened to the delivery. */
export type WebhookDeliveryRow = {
  id: string
  event_id: string
  event_type: string
  occurred_at: Date
  state: string
  attempt_count: number
  next_attempt_at: Date
  last_status_code: number | null
  last_failure: string | null
  finished_at: Date | null
}

export async function webhookDeliveryRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  endpointId: string,
  limit: number,
): Promise<WebhookDeliveryRow[]> {
  const { rows } = await db.raw<{ rows: WebhookDeliveryRow[] }>('SELECT * FROM platform.webhook_delivery_page(?, ?, ?, ?)', [
    sessionTokenHash,
    now,
    endpointId,
    limit,
  ])
  return rows
}

/** How many dead-lettered deliveries went back to pending; null when there is no such enabled endpoint. */
export async function redriveWebhookDeliveriesTx(
  trx: Knex.Transaction,
  sessionTokenHash: Buffer,
  now: Date,
  endpointId: string,
): Promise<number | null> {
  const { rows } = await trx.raw<{ rows: { redriven: number | null }[] }>(
    'SELECT platform.redrive_webhook_deliveries(?, ?, ?) AS redriven',
    [sessionTokenHash, now, endpointId],
  )
  return rows[0]?.redriven ?? null
}
