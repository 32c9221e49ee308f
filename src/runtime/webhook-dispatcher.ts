import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { deliverWebhooksOnce, type WebhookDeliverDeps } from '../../jobs/webhook-deliver.ts'
import type { CoreConfig as Config } from '../../config/schema.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { createWebhookPost } from '../delivery/webhook-sender.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { guardedLookup, type Resolve } from '../platform/webhook-address-guard.ts'

/** The channel `platform.append_event` and the redrive notify at commit when a delivery became due. */
export const WEBHOOK_WAKE_CHANNEL = 'sealpost_webhook_deliveries'

export type WebhookDispatcher = { wake: () => void; stop: () => Promise<void> }

/**
 * The worker's webhook loop: a pass of `deliverWebhooksOnce` whenever a commit notifies, a full
 * batch came back, or `pollMs` passed (retries come due without a notification). Passes never
 * overlap; stop lets the running pass finish its sends and records.
 */
export function startWebhookDispatcher(deps: WebhookDeliverDeps, options: { pollMs: number }): WebhookDispatcher {
  let stopped = false
  let wakeUp: (() => void) | undefined
  let again = false
  const loop = (async () => {
    while (!stopped) {
      again = false
      try {
        const counts = await deliverWebhooksOnce(deps)
        if (counts.claimed >= deps.batchSize) continue
      } catch (error) {
        deps.logger.error('webhook pass failed; the next one retries', describeError(error))
      }
      if (stopped || again) continue
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, options.pollMs)
        wakeUp = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      wakeUp = undefined
    }
  })()
  return {
    wake() {
      again = true
      wakeUp?.()
    },
    async stop() {
      stopped = true
      wakeUp?.()
      await loop
    },
  }
}

/**
 * Signed events out (docs/events.md "Delivery"): the webhook loop, woken by the fan-out's NOTIFY,
 * posting through agents whose connections resolve with the SSRF guard.
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
  leaseSeconds: number
}) {
  const { config } = input
  const allowedHosts = config.WEBHOOK_ALLOWED_HOSTS
  const post = createWebhookPost({ lookup: guardedLookup({ allowedHosts, resolve: input.resolve }), timeoutMs: config.SEND_TIMEOUT_MS })
  const dispatcher = startWebhookDispatcher(
    {
      db: input.db,
      outboxKey: input.keys.outboxKey,
      post,
      addresses: { production: config.NODE_ENV === 'production', allowedHosts },
      settings: {
        maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
        retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
        maxRetryAfterSeconds: config.MAX_PROVIDER_PAUSE_SECONDS,
      },
      leaseSeconds: input.leaseSeconds,
      batchSize: 32,
      clock: input.clock,
      logger: input.logger,
    },
    { pollMs: 1_000 },
  )
  const listener = await input.boss.getDb().listen?.(
    WEBHOOK_WAKE_CHANNEL,
    () => dispatcher.wake(),
    () => dispatcher.wake(),
  )
  return { dispatcher, listener, post }
}

export type RunningWebhooks = Awaited<ReturnType<typeof startWebhooks>>

export async function stopWebhooks(
  webhooks: { dispatcher: WebhookDispatcher; listener?: { close: () => Promise<void> }; post: { close: () => void } } | undefined,
) {
  if (!webhooks) return
  await webhooks.listener?.close()
  await webhooks.dispatcher.stop()
  webhooks.post.close()
}
