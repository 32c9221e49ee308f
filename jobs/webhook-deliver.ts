import type { Knex } from 'knex'
import { EnvelopeError, open } from '../src/crypto/envelope.ts'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import { signWebhook } from '../src/crypto/webhook-signature.ts'
import { parseRetryAfter } from '../src/providers/retry-after.ts'
import type { WebhookPost } from '../src/delivery/webhook-sender.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import { WEBHOOK_FAILURES } from '../src/platform/event-types.ts'
import { checkWebhookUrlShape, WebhookUrlRefusedError, type AddressPolicy } from '../src/platform/webhook-address-guard.ts'
import {
  claimDueDeliveries,
  recordDeliveryAttempts,
  type ClaimedDelivery,
  type DeliveryRecord,
} from '../src/platform/webhook-deliveries-sql.ts'
import { secretContext } from '../src/platform/webhook-endpoints.ts'
import { decideWebhook, type WebhookOutcome, type WebhookRetrySettings } from '../src/platform/webhook-retry.ts'

export type WebhookDeliverDeps = {
  db: Knex
  outboxKey: KeyRing
  /** The POST, through agents whose connections resolve with the SSRF guard (src/delivery/webhook-sender.ts). */
  post: WebhookPost
  addresses: Pick<AddressPolicy, 'production' | 'allowedHosts'>
  settings: WebhookRetrySettings
  /** Above the send timeout: a delivery whose worker died goes out again once this lapses. */
  leaseSeconds: number
  batchSize: number
  clock: () => Date
  logger: Logger
}

export type WebhookPassCounts = { claimed: number; delivered: number; retried: number; deadLettered: number; leaseLost: number }

/** The signing secrets in force: the current one, and the rotated-out one during its overlap. */
function secretsOf(delivery: ClaimedDelivery, outboxKey: KeyRing, now: Date): string[] {
  const context = secretContext(delivery.endpoint_id, delivery.url)
  const secrets = [open(outboxKey, delivery.secret_envelope, context).toString('utf8')]
  if (delivery.previous_secret_envelope && delivery.previous_secret_until && delivery.previous_secret_until > now)
    secrets.push(open(outboxKey, delivery.previous_secret_envelope, context).toString('utf8'))
  return secrets
}

/** Sends one claimed delivery (no transaction open) and says what its attempt came to. */
async function attempt(deps: WebhookDeliverDeps, delivery: ClaimedDelivery): Promise<DeliveryRecord> {
  const now = deps.clock()
  let url: URL
  let secrets: string[]
  try {
    url = checkWebhookUrlShape(delivery.url, deps.addresses).url
    secrets = secretsOf(delivery, deps.outboxKey, now)
  } catch (error) {
    if (error instanceof EnvelopeError) {
      deps.logger.error('webhook signing secret cannot be opened; delivery dead-lettered', {
        endpointId: delivery.endpoint_id,
        ...describeError(error),
      })
      return { state: 'dead_lettered', status: null, failure: WEBHOOK_FAILURES.secretUnreadable }
    }
    if (error instanceof WebhookUrlRefusedError) return { state: 'dead_lettered', status: null, failure: WEBHOOK_FAILURES.addressRefused }
    throw error
  }
  const body = JSON.stringify({ type: delivery.type, timestamp: delivery.occurred_at.toISOString(), data: delivery.payload })
  const timestamp = Math.floor(now.getTime() / 1000)
  const answer = await deps.post({
    url,
    body,
    headers: {
      'webhook-id': delivery.event_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(secrets, delivery.event_id, timestamp, body),
      'user-agent': 'Sealpost-Webhooks/1',
    },
  })
  const answeredAt = deps.clock()
  const outcome: WebhookOutcome =
    answer.kind === 'answered'
      ? { kind: 'answered', status: answer.status, retryAfterAt: parseRetryAfter(answer.retryAfter, answeredAt) }
      : answer.kind === 'unsent'
        ? { kind: 'unsent' }
        : answer
  const decision = decideWebhook(deps.settings, delivery.attempt_count, outcome, answeredAt)
  if (decision.kind === 'delivered') return { state: 'delivered', status: decision.status }
  if (decision.kind === 'retry') return { state: 'pending', nextAttemptAt: decision.at, status: decision.status, failure: decision.failure }
  return { state: 'dead_lettered', status: decision.status, failure: decision.failure }
}

/**
 * One pass (docs/events.md "Delivery"): lease the due deliveries, send each outside any
 * transaction, record the pass in one short statement. A failure between send and record (a
 * crash, a lost database) records nothing: the lease lapses and the delivery goes out again with
 * the same `webhook-id`, a duplicate only where the outcome was never recorded.
 */
export async function deliverWebhooksOnce(deps: WebhookDeliverDeps): Promise<WebhookPassCounts> {
  const now = deps.clock()
  const claimed = await claimDueDeliveries(deps.db, now, new Date(now.getTime() + deps.leaseSeconds * 1000), deps.batchSize)
  const counts: WebhookPassCounts = { claimed: claimed.length, delivered: 0, retried: 0, deadLettered: 0, leaseLost: 0 }
  // Sent side by side; a failure before the record (a crash, a lost database) records nothing for that delivery.
  const attempts = (
    await Promise.all(
      claimed.map(async (delivery) => {
        try {
          return { delivery, record: await attempt(deps, delivery) }
        } catch (error) {
          deps.logger.error('webhook delivery not recorded; it goes out again when its lease lapses', {
            endpointId: delivery.endpoint_id,
            webhookId: delivery.event_id,
            ...describeError(error),
          })
          return undefined
        }
      }),
    )
  ).filter((entry) => entry !== undefined)
  // One short statement records the whole pass.
  const recorded = await recordDeliveryAttempts(deps.db, attempts, deps.clock())
  for (const { delivery, record } of attempts) {
    if (!recorded.has(delivery.id)) counts.leaseLost += 1
    else if (record.state === 'delivered') counts.delivered += 1
    else if (record.state === 'pending') counts.retried += 1
    else {
      counts.deadLettered += 1
      deps.logger.warn('webhook delivery dead-lettered', {
        endpointId: delivery.endpoint_id,
        webhookId: delivery.event_id,
        failure: record.failure,
        status: record.status,
      })
    }
  }
  return counts
}
