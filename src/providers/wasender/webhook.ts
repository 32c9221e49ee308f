import { z } from 'zod'
import { sameSecret } from '../../crypto/constant-time.ts'
import { refuseWebhook, storeEvent, WebhookOutcomeSchema, type JsonDelivery, type WebhookDeps, type WebhookOutcome } from '../webhooks.ts'
import { wasenderEventsFrom } from './events.ts'

/** WASENDER_WEBHOOK_SECRET: the webhook secret of the Wasender session. */
export type WasenderWebhookSettings = { secret: string }

/** A Wasender webhook as the API document describes it (and as the web checks a JSON body against). */
export const WasenderStatusUpdate = z
  .object({
    event: z.string().describe('messages.update; other events are ignored'),
    data: z
      .union([z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .describe('{key: {id}, update: {status}} or a list of them (required)'),
    timestamp: z.number().optional(),
  })
  .describe('Wasender webhook; X-Webhook-Signature must equal WASENDER_WEBHOOK_SECRET')
export const WasenderWebhookAnswer = z.object({ outcomes: z.array(WebhookOutcomeSchema) })

/**
 * `POST /webhooks/wasender`: Wasender's documented check is that the `X-Webhook-Signature` header
 * equals the webhook secret configured for the session (compared here in constant time); then a
 * body the web could not read as documented is refused, and each message status update is stored.
 */
export async function receiveWasenderWebhook(
  deps: WebhookDeps,
  wasender: WasenderWebhookSettings | undefined,
  delivery: JsonDelivery,
  signature: string | undefined,
): Promise<WebhookOutcome[]> {
  const refuse = (reason: string): never => refuseWebhook(deps, 'wasender', 'Wasender', reason)
  if (!wasender || signature === undefined || !sameSecret(signature, wasender.secret)) refuse('invalid_signature')
  if ('unreadable' in delivery) return refuse(delivery.unreadable)
  const events = wasenderEventsFrom(delivery.body, deps.clock())
  if (events.length === 0) {
    deps.count('wasender', 'ignored')
    return ['ignored']
  }
  const outcomes: WebhookOutcome[] = []
  for (const event of events) outcomes.push((await storeEvent(deps, 'wasender', 'whatsapp', event)).outcome)
  return outcomes
}
