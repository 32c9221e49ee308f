import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { envelopeContext, seal, type EnvelopeContext } from '../crypto/envelope.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { newWebhookSecret } from '../crypto/webhook-signature.ts'
import { requireElevationTx } from '../identity/elevation.ts'
import { NotFoundError } from '../identity/errors.ts'
import type { EventType } from './event-types.ts'
import type { StaffSession } from './outbox-admin.ts'
import { checkWebhookUrl, type AddressPolicy } from './webhook-address-guard.ts'
import {
  createWebhookEndpointTx,
  disableWebhookEndpointTx,
  redriveWebhookDeliveriesTx,
  rotateWebhookSecretTx,
  webhookDeliveryRows,
  webhookEndpointRows,
  webhookEndpointUrlTx,
} from './webhook-endpoints-sql.ts'

/** How long a rotated-out secret keeps signing beside the new one: receivers switch within it. */
export const SECRET_OVERLAP_MS = 60 * 60 * 1000

export type WebhookEndpointDeps = { db: Knex; outboxKey: KeyRing; addresses: AddressPolicy; clock: () => Date }

/**
 * What a signing secret's seal is bound to: the endpoint and its URL, so a secret copied to another
 * row, or a row whose URL was edited in the database, no longer opens.
 */
export function secretContext(endpointId: string, url: string): EnvelopeContext {
  return envelopeContext(endpointId, 'webhook_signing_secret', 'webhook', url)
}

const notFound = () => new NotFoundError('webhook_endpoint_not_found', 'There is no such webhook endpoint.')

/**
 * `POST /platform-admin/webhook-endpoints` (staff with a fresh elevation): the URL is checked (and
 * resolved) before anything is written; the secret is returned once and stored only sealed.
 */
export async function createWebhookEndpoint(
  deps: WebhookEndpointDeps,
  input: { staff: StaffSession; elevationToken: string | undefined; url: string; events: readonly EventType[] },
): Promise<{ id: string; secret: string }> {
  const now = deps.clock()
  await deps.db.transaction(async (trx) => requireElevationTx(trx, input.staff, input.elevationToken, now))
  await checkWebhookUrl(input.url, deps.addresses)
  const id = randomUUID()
  const secret = newWebhookSecret()
  const secretEnvelope = seal(deps.outboxKey, Buffer.from(secret), secretContext(id, input.url))
  await deps.db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    await createWebhookEndpointTx(trx, input.staff.tokenHash, now, {
      id,
      url: input.url,
      events: [...new Set(input.events)],
      secretEnvelope,
    })
  })
  return { id, secret }
}

/** `GET /platform-admin/webhook-endpoints`: every endpoint, newest first, with its backlog; never a secret. */
export async function listWebhookEndpoints(deps: Pick<WebhookEndpointDeps, 'db' | 'clock'>, staff: Pick<StaffSession, 'tokenHash'>) {
  const rows = await webhookEndpointRows(deps.db, staff.tokenHash, deps.clock())
  return {
    items: rows.map((row) => ({
      id: row.id,
      url: row.url,
      events: row.events,
      createdAt: row.created_at.toISOString(),
      disabledAt: row.disabled_at?.toISOString() ?? null,
      pendingDeliveries: Number(row.pending),
      deadLetteredDeliveries: Number(row.dead_lettered),
    })),
  }
}

/** `DELETE …/{id}` (staff, elevated): the endpoint hears nothing more; its pending deliveries stop. */
export async function disableWebhookEndpoint(
  deps: Pick<WebhookEndpointDeps, 'db' | 'clock'>,
  input: { staff: StaffSession; elevationToken: string | undefined; id: string },
): Promise<void> {
  const now = deps.clock()
  await deps.db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    if (!(await disableWebhookEndpointTx(trx, input.staff.tokenHash, now, input.id))) throw notFound()
  })
}

/** `POST …/{id}/secret` (staff, elevated): a new secret, shown once; the old one signs beside it for SECRET_OVERLAP_MS. */
export async function rotateWebhookSecret(
  deps: WebhookEndpointDeps,
  input: { staff: StaffSession; elevationToken: string | undefined; id: string },
): Promise<{ id: string; secret: string; previousSecretExpiresAt: string }> {
  const now = deps.clock()
  const previousUntil = new Date(now.getTime() + SECRET_OVERLAP_MS)
  const secret = newWebhookSecret()
  await deps.db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const url = await webhookEndpointUrlTx(trx, input.staff.tokenHash, now, input.id)
    if (url === undefined) throw notFound()
    const secretEnvelope = seal(deps.outboxKey, Buffer.from(secret), secretContext(input.id, url))
    if (!(await rotateWebhookSecretTx(trx, input.staff.tokenHash, now, { id: input.id, secretEnvelope, previousUntil }))) throw notFound()
  })
  return { id: input.id, secret, previousSecretExpiresAt: previousUntil.toISOString() }
}

/** `GET …/{id}/deliveries`: the endpoint's recent deliveries, newest first, without payloads. */
export async function recentWebhookDeliveries(
  deps: Pick<WebhookEndpointDeps, 'db' | 'clock'>,
  input: { staff: Pick<StaffSession, 'tokenHash'>; id: string; limit: number },
) {
  const rows = await webhookDeliveryRows(deps.db, input.staff.tokenHash, deps.clock(), input.id, input.limit)
  return {
    items: rows.map((row) => ({
      webhookId: row.event_id,
      eventType: row.event_type,
      occurredAt: row.occurred_at.toISOString(),
      state: row.state,
      attempts: row.attempt_count,
      nextAttemptAt: row.state === 'pending' ? row.next_attempt_at.toISOString() : null,
      lastStatusCode: row.last_status_code,
      lastFailure: row.last_failure,
      finishedAt: row.finished_at?.toISOString() ?? null,
    })),
  }
}

/** `POST …/{id}/redrives` (staff, elevated): every dead-lettered delivery of the endpoint goes out again, same webhook-id. */
export async function redriveWebhookDeliveries(
  deps: Pick<WebhookEndpointDeps, 'db' | 'clock'>,
  input: { staff: StaffSession; elevationToken: string | undefined; id: string },
): Promise<{ redriven: number }> {
  const now = deps.clock()
  return await deps.db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const redriven = await redriveWebhookDeliveriesTx(trx, input.staff.tokenHash, now, input.id)
    if (redriven === null) throw notFound()
    return { redriven }
  })
}
