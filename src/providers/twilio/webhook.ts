import { z } from 'zod'
import { refuseWebhook, storeEvent, WebhookOutcomeSchema, type FormDelivery, type WebhookDeps, type WebhookOutcome } from '../webhooks.ts'
import { twilioEventFrom } from './events.ts'
import { twilioSignatureValid } from './signature.ts'

/** The account's auth token (it signs every callback) and the callback URL messages were sent with (from PUBLIC_BASE_URL). */
export type TwilioWebhookSettings = { authToken: string; callbackUrl: string }

/** A status callback as the API document describes it. */
export const TwilioStatusCallback = z
  .object({
    MessageSid: z.string().describe('SM… (SmsSid carries the same)'),
    MessageStatus: z.string().describe('delivered, undelivered and failed are stored; other statuses are ignored'),
    ErrorCode: z.string().optional().describe('with undelivered / failed: 30005 and 30006 suppress the number'),
    To: z.string().optional(),
    AccountSid: z.string().optional(),
  })
  .catchall(z.string())
  .describe(
    'A Twilio message status callback (form-encoded); X-Twilio-Signature covers PUBLIC_BASE_URL/webhooks/twilio and every parameter',
  )
export const TwilioWebhookAnswer = z.object({ outcome: WebhookOutcomeSchema })

/**
 * `POST /webhooks/twilio`: a message status callback. The `X-Twilio-Signature` must be Twilio's
 * over the callback URL messages were sent with (never one built from the request's Host) and
 * every parameter received; then the status is stored once per message, status and error code
 * (Twilio sends no time: a replay is a duplicate, which is the only replay defence it leaves).
 */
export async function receiveTwilioWebhook(
  deps: WebhookDeps,
  twilio: TwilioWebhookSettings | undefined,
  delivery: FormDelivery,
  signature: string | undefined,
): Promise<WebhookOutcome> {
  const refuse = (reason: string): never => refuseWebhook(deps, 'twilio', 'Twilio', reason)
  const params = 'params' in delivery ? delivery.params : []
  if (!twilio || !twilioSignatureValid(twilio.authToken, twilio.callbackUrl, params, signature)) refuse('invalid_signature')
  if ('unreadable' in delivery) return refuse(delivery.unreadable)
  const event = twilioEventFrom(new Map(params))
  if (!event) {
    deps.count('twilio', 'ignored')
    return 'ignored'
  }
  return (await storeEvent(deps, 'twilio', 'sms', event)).outcome
}
