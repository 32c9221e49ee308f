import { deliverWebhooksOnce, type WebhookDeliverDeps } from '../../jobs/webhook-deliver.ts'
import { describeError } from '../logging/logger.ts'

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
