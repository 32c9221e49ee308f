import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { fromKnex, type Job, type PgBoss } from 'pg-boss'
import { EnvelopeError, open } from '../src/crypto/envelope.ts'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import { signWebhook } from '../src/crypto/webhook-signature.ts'
import { QUEUES } from '../src/db/queues.ts'
import { parseRetryAfter } from '../src/providers/retry-after.ts'
import type { WebhookPost } from '../src/delivery/webhook-sender.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import { batchOrEach, type Failed } from '../src/outbox/batch-or-each.ts'
import { completeJobsTx, LeaseLostError } from '../src/outbox/settle.ts'
import { WEBHOOK_FAILURES } from '../src/platform/event-types.ts'
import { checkWebhookUrlShape, WebhookUrlRefusedError, type AddressPolicy } from '../src/platform/webhook-address-guard.ts'
import { claimDeliveriesTx, recordDeliveriesTx, type ClaimedDelivery, type DeliveryRecord } from '../src/platform/webhook-deliveries-sql.ts'
import { secretContext } from '../src/platform/webhook-endpoints.ts'
import { decideWebhook, type WebhookOutcome, type WebhookRetrySettings } from '../src/platform/webhook-retry.ts'

/** A `webhook-delivery` job's data: the delivery row's id, nothing else (its event may name a person). */
export type WebhookJobData = { deliveryId: string }

export type WebhookDeliverDeps = {
  db: Knex
  boss: PgBoss
  outboxKey: KeyRing
  /** The POST, through agents whose connections resolve with the SSRF guard (src/delivery/webhook-sender.ts). */
  post: WebhookPost
  addresses: Pick<AddressPolicy, 'production' | 'allowedHosts'>
  settings: WebhookRetrySettings
  clock: () => Date
  logger: Logger
}

/** What one job came to: `stale` when it owned nothing to send, `lease_lost` when its record was refused. */
export type WebhookJobOutcome = 'delivered' | 'retried' | 'dead_lettered' | 'stale' | 'lease_lost'

/** The signing secrets in force: the current one, and the rotated-out one during its overlap. */
function secretsOf(delivery: ClaimedDelivery, outboxKey: KeyRing, now: Date): string[] {
  const context = secretContext(delivery.endpoint_id, delivery.url)
  const secrets = [open(outboxKey, delivery.secret_envelope, context).toString('utf8')]
  if (delivery.previous_secret_envelope && delivery.previous_secret_until && delivery.previous_secret_until > now)
    secrets.push(open(outboxKey, delivery.previous_secret_envelope, context).toString('utf8'))
  return secrets
}

/** Sends one claimed delivery (no transaction open) and says what its attempt came to. */
export async function sendWebhook(deps: WebhookDeliverDeps, delivery: ClaimedDelivery): Promise<DeliveryRecord> {
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
  if (decision.kind === 'retry')
    return { state: 'pending', nextAttemptAt: decision.at, nextJobId: randomUUID(), status: decision.status, failure: decision.failure }
  return { state: 'dead_lettered', status: decision.status, failure: decision.failure }
}

/** A fetched job and the delivery its claim counted an attempt of (none: the job owned nothing to send). */
export type ClaimedJob = { job: Job<WebhookJobData>; delivery: ClaimedDelivery | undefined }

const deliveryIdOf = (job: Job<WebhookJobData>) =>
  typeof job.data?.deliveryId === 'string' && /^\d{1,18}$/.test(job.data.deliveryId) ? job.data.deliveryId : undefined

/** Claims the deliveries of fetched jobs in the caller's transaction (the fetch's own, in the worker): one statement for all. */
export async function claimWebhookJobsTx(trx: Knex.Transaction, jobs: readonly Job<WebhookJobData>[]): Promise<ClaimedJob[]> {
  const wanted = jobs.flatMap((job) => {
    const deliveryId = deliveryIdOf(job)
    return deliveryId ? [{ deliveryId, jobId: job.id }] : []
  })
  const claimed = new Map((await claimDeliveriesTx(trx, wanted)).map((delivery) => [delivery.job_id, delivery]))
  return jobs.map((job) => ({ job, delivery: claimed.get(job.id) }))
}

/** A job ready to record: its claim and, if it had a delivery, what the send came to. */
export type PendingWebhookRecord = ClaimedJob & { record?: DeliveryRecord }

/**
 * Records a group of attempts and settles their jobs in one transaction: the deliveries' rows, the
 * jobs of their next attempts (`startAfter` from the retry policy, in the endpoint's group) and
 * every job's completion under the attempt it was fetched at, which throws `LeaseLostError` if
 * pg-boss gave one of them to another worker meanwhile (the group rolls back). A job whose
 * delivery changed meanwhile (disabled, deleted) just ends.
 */
async function recordGroupTx(trx: Knex.Transaction, deps: WebhookDeliverDeps, entries: readonly PendingWebhookRecord[]) {
  const sent = entries.flatMap((entry) =>
    entry.delivery && entry.record ? [{ ...entry, delivery: entry.delivery, record: entry.record }] : [],
  )
  const recorded = await recordDeliveriesTx(trx, sent, deps.clock())
  const next = sent.flatMap(({ delivery, record }) => {
    if (!recorded.has(delivery.id) || record.state !== 'pending') return []
    const data: WebhookJobData = { deliveryId: delivery.id }
    return [{ id: record.nextJobId, data, startAfter: record.nextAttemptAt, group: { id: delivery.endpoint_id } }]
  })
  if (next.length > 0) await deps.boss.insert(QUEUES.webhookDelivery, next, { db: fromKnex(trx) })
  const leases = entries.map(({ job }) => ({ jobId: job.id, retryCount: job.retryCount }))
  await completeJobsTx(trx, deps.boss, leases, QUEUES.webhookDelivery)
  return entries.map(({ delivery, record }): WebhookJobOutcome => {
    if (!delivery || !record || !recorded.has(delivery.id)) return 'stale'
    return record.state === 'pending' ? 'retried' : record.state
  })
}

/**
 * The record step (docs/events.md "Delivery"): a group in one transaction, or, when that cannot
 * commit, each entry alone (`batchOrEach`), so one lost lease costs only its own record. An entry
 * that fails even alone for another reason comes back failed, for its job to be failed back to pg-boss.
 */
export async function recordWebhookOutcomes(
  deps: WebhookDeliverDeps,
  entries: readonly PendingWebhookRecord[],
): Promise<(WebhookJobOutcome | Failed)[]> {
  const results = await batchOrEach(entries, (group) => deps.db.transaction((trx) => recordGroupTx(trx, deps, group)))
  return results.map((result, index) => {
    const { job, delivery, record } = entries[index]!
    if (typeof result !== 'string') {
      if (!(result.error instanceof LeaseLostError)) return result
      deps.logger.warn('webhook delivery lease lost; its newer attempt records it', { endpointId: delivery?.endpoint_id, jobId: job.id })
      return 'lease_lost'
    }
    if (result === 'dead_lettered' && record?.state === 'dead_lettered')
      deps.logger.warn('webhook delivery dead-lettered', {
        endpointId: delivery?.endpoint_id,
        webhookId: delivery?.event_id,
        failure: record.failure,
        status: record.status,
      })
    return result
  })
}
