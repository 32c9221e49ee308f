import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { createWebhookCrashLoopHandler } from '../../jobs/webhook-crash-loop.ts'
import { createWebhookDeliveryHandler, type WebhookDeliverDeps } from '../../jobs/webhook-deliver.ts'
import { createWebhookFanOutHandler } from '../../jobs/webhook-fan-out.ts'
import type { Config } from '../../config/schema.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { QUEUES } from '../db/queues.ts'
import { createWebhookPost } from '../delivery/webhook-sender.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { guardedLookup, type Resolve } from '../platform/webhook-address-guard.ts'

/** The channel `platform.append_event` and the redrive notify at commit when there is something to fan out. */
export const WEBHOOK_WAKE_CHANNEL = 'sealpost_webhook_deliveries'

/**
 * How a worker works `webhook-delivery` (docs/events.md "Delivery"): up to `localConcurrency`
 * deliveries in flight, each its own job (a slow receiver holds only its own slots, never a batch);
 * at most `groupConcurrency` of one endpoint's deliveries in flight across the whole fleet (pg-boss
 * group concurrency), so one endpoint hanging until the send timeout leaves the other slots to the
 * others; retries that come due are fetched within `pollingIntervalSeconds`.
 */
export const WEBHOOK_WORK = Object.freeze({ localConcurrency: 8, groupConcurrency: 4, pollingIntervalSeconds: 2 })

/** Every fan-out this long at most after a missed wake-up (pg-boss schedules run at most once a minute). */
const FAN_OUT_FLOOR_CRON = '* * * * *'

/**
 * One fan-out job asked for at a time: wake-ups that arrive while a request is on its way are
 * answered by the next one (the queue keeps at most one waiting job anyway).
 */
function fanOutRequests(boss: PgBoss, logger: Logger) {
  let inFlight: Promise<void> | undefined
  let again = false
  const request = (): void => {
    if (inFlight) {
      again = true
      return
    }
    inFlight = boss
      .send(QUEUES.webhookFanOut, null)
      .then(
        () => undefined,
        (error: unknown) => {
          logger.warn('webhook fan-out not requested; the next wake-up or the schedule runs it', describeError(error))
        },
      )
      .finally(() => {
        inFlight = undefined
        if (again) {
          again = false
          request()
        }
      })
  }
  return { request, settled: async () => await inFlight }
}

/**
 * Signed events out on pg-boss (docs/events.md "Delivery"): the fan-out queue (woken by the
 * triggers' NOTIFY, floored by a schedule), the delivery queue and its crash-loop queue, posting
 * through agents whose connections resolve with the SSRF guard.
 */
export async function startWebhooks(input: {
  db: Knex
  boss: PgBoss
  config: Pick<
    Config,
    | 'NODE_ENV'
    | 'WEBHOOK_ALLOWED_HOSTS'
    | 'WEBHOOK_RETRY_SCHEDULE'
    | 'WEBHOOK_MAX_ATTEMPTS'
    | 'SEND_TIMEOUT_MS'
    | 'MAX_PROVIDER_PAUSE_SECONDS'
  >
  keys: { outboxKey: KeyRing }
  clock: () => Date
  logger: Logger
  resolve: Resolve
}) {
  const { config, boss, db, clock, logger } = input
  const allowedHosts = config.WEBHOOK_ALLOWED_HOSTS
  const post = createWebhookPost({ lookup: guardedLookup({ allowedHosts, resolve: input.resolve }), timeoutMs: config.SEND_TIMEOUT_MS })
  const deps: WebhookDeliverDeps = {
    db,
    boss,
    outboxKey: input.keys.outboxKey,
    post,
    addresses: { production: config.NODE_ENV === 'production', allowedHosts },
    settings: {
      maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
      retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
      maxRetryAfterSeconds: config.MAX_PROVIDER_PAUSE_SECONDS,
    },
    clock,
    logger,
  }
  const { pollingIntervalSeconds, ...concurrency } = WEBHOOK_WORK
  try {
    await boss.work(
      QUEUES.webhookDelivery,
      { batchSize: 1, ...concurrency, pollingIntervalSeconds, notifyPollingIntervalSeconds: pollingIntervalSeconds },
      createWebhookDeliveryHandler(deps),
    )
    await boss.work(QUEUES.webhookCrashLoop, { batchSize: 10 }, createWebhookCrashLoopHandler({ db, boss, clock, logger }))
    await boss.work(QUEUES.webhookFanOut, createWebhookFanOutHandler({ db, boss, clock, logger }))
    await boss.schedule(QUEUES.webhookFanOut, FAN_OUT_FLOOR_CRON, null, { tz: 'UTC' })
  } catch (error) {
    post.close()
    throw error
  }
  const fanOut = fanOutRequests(boss, logger)
  const listener = await boss.getDb().listen?.(WEBHOOK_WAKE_CHANNEL, fanOut.request, fanOut.request)
  // What was committed while no worker listened goes out now, not at the next schedule tick.
  fanOut.request()
  return {
    /** No more wake-ups; the handlers in flight finish their sends and records; then the agents close. */
    async stop() {
      await listener?.close()
      await fanOut.settled()
      for (const queue of [QUEUES.webhookFanOut, QUEUES.webhookDelivery, QUEUES.webhookCrashLoop]) await boss.offWork(queue, { wait: true })
      post.close()
    },
  }
}

export type RunningWebhooks = Awaited<ReturnType<typeof startWebhooks>>
