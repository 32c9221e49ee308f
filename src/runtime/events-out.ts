import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { createWebhookCrashLoopHandler } from '../../jobs/webhook-crash-loop.ts'
import type { WebhookDeliverDeps } from '../../jobs/webhook-deliver.ts'
import { createWebhookFanOutHandler } from '../../jobs/webhook-fan-out.ts'
import type { CoreConfig as Config } from '../../config/schema.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { QUEUES } from '../db/queues.ts'
import { createWebhookPost } from '../delivery/webhook-sender.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { guardedLookup, type Resolve } from '../platform/webhook-address-guard.ts'
import { startWebhookLoop, type WebhookLoopOptions } from './webhook-loop.ts'

/** The channel `platform.append_event` and the redrive notify at commit when there is something to fan out. */
export const WEBHOOK_WAKE_CHANNEL = 'sealpost_webhook_deliveries'

/**
 * How a worker works `webhook-delivery` (docs/events.md "Delivery"): up to 64 deliveries in flight,
 * each sent on its own (a slow receiver holds only its own slots, never a batch); at most 16 of one
 * endpoint's deliveries in flight across the whole fleet (pg-boss group concurrency), so one
 * endpoint hanging until the send timeout leaves most slots to the others; retries that come due
 * are fetched within a second.
 */
export const WEBHOOK_WORK: Readonly<WebhookLoopOptions> = Object.freeze({ concurrency: 64, groupConcurrency: 16, pollMs: 1_000 })

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
 * triggers' NOTIFY, floored by a schedule), the delivery loop (woken through `wake` by the
 * worker's listener on pg-boss's channel) and the crash-loop queue, posting through agents whose
 * connections resolve with the SSRF guard.
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
  const fanOut = fanOutRequests(boss, logger)
  let listener: { close: () => Promise<void> } | undefined
  try {
    await boss.work(QUEUES.webhookCrashLoop, { batchSize: 10 }, createWebhookCrashLoopHandler({ db, boss, clock, logger }))
    await boss.work(QUEUES.webhookFanOut, createWebhookFanOutHandler({ db, boss, clock, logger }))
    await boss.schedule(QUEUES.webhookFanOut, FAN_OUT_FLOOR_CRON, null, { tz: 'UTC' })
    listener = await boss.getDb().listen?.(WEBHOOK_WAKE_CHANNEL, fanOut.request, fanOut.request)
  } catch (error) {
    post.close()
    throw error
  }
  const delivery = startWebhookLoop(deps, WEBHOOK_WORK)
  // What was committed while no worker listened goes out now, not at the next schedule tick.
  fanOut.request()
  return {
    /** A `webhook-delivery` job was sent (pg-boss's NOTIFY for the queue): fetch now. */
    wake: delivery.wake,
    /** No more wake-ups; the deliveries in flight finish their sends and records; then the agents close. */
    async stop() {
      await listener?.close()
      await fanOut.settled()
      await delivery.stop()
      for (const queue of [QUEUES.webhookFanOut, QUEUES.webhookCrashLoop]) await boss.offWork(queue, { wait: true })
      post.close()
    },
  }
}

export type RunningWebhooks = Awaited<ReturnType<typeof startWebhooks>>
