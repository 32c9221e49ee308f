import express, { type Router } from 'express'
import { z } from 'zod'
import { TWILIO_WEBHOOK_PATH } from '../../providers/twilio/signature.ts'
import {
  receiveSesWebhook,
  receiveTwilioWebhook,
  receiveWasenderWebhook,
  WebhookRefusedError,
  type TwilioDelivery,
  type WasenderDelivery,
  type WebhookDeps,
} from '../../providers/webhooks.ts'
import { receiveWhatsAppCloudWebhook, verifyWhatsAppCloudSubscription } from '../../providers/whatsapp-cloud/webhook.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError } from '../problem.ts'
import {
  SesWebhookAnswer,
  SnsDelivery,
  TwilioStatusCallback,
  TwilioWebhookAnswer,
  WasenderStatusUpdate,
  WasenderWebhookAnswer,
  WhatsAppCloudStatusUpdate,
  WhatsAppCloudVerification,
  WhatsAppCloudWebhookAnswer,
} from '../schemas.ts'

const SES_REFUSALS = ['invalid_signature', 'invalid_certificate_url', 'invalid_subscribe_url', 'unknown_topic', 'stale_message'] as const

const REFUSAL_STATUS: Record<string, number> = { malformed: 400, unsupported_media_type: 415, certificate_unavailable: 503 }

/** The API document's description of each route below, in the same order. */
export const webhookApi = apiRegistry(
  'Webhooks',
  'Provider delivery events: Amazon SNS deliveries of SES events, Wasender and WhatsApp Cloud API message status updates, Twilio message status callbacks',
)
const api = {
  ses: webhookApi.add({
    operationId: 'receiveSesEvent',
    method: 'post',
    path: '/webhooks/ses',
    auth: 'none',
    summary: 'Amazon SNS deliveries of SES events (signature verified; subscriptions confirmed only for SES_EVENTS_TOPIC_ARN)',
    description:
      'SNS posts JSON as text/plain with x-amz-sns-message-type. Refusals (4xx) are final for SNS; an authentic event for a message we do not know is 200 unknown_message; a certificate that cannot be fetched is 503 so SNS retries.',
    body: SnsDelivery,
    bodyContentType: 'text/plain',
    success: { status: 200, description: 'Handled', body: SesWebhookAnswer },
    problems: { 400: ['malformed'], 403: SES_REFUSALS, 503: ['certificate_unavailable'] },
  }),
  wasender: webhookApi.add({
    operationId: 'receiveWasenderStatus',
    method: 'post',
    path: '/webhooks/wasender',
    auth: 'none',
    summary: 'Wasender message status updates (X-Webhook-Signature must equal WASENDER_WEBHOOK_SECRET)',
    body: WasenderStatusUpdate,
    success: { status: 200, description: 'Handled', body: WasenderWebhookAnswer },
    description:
      'The signature is checked first (403); then a body other than `application/json` is 415 and one that does not match the schema is 400 `malformed`.',
    problems: { 400: ['malformed'], 403: ['invalid_signature'], 415: ['unsupported_media_type'] },
  }),
  whatsappCloudVerify: webhookApi.add({
    operationId: 'verifyWhatsAppCloudSubscription',
    method: 'get',
    path: '/webhooks/whatsapp-cloud',
    auth: 'none',
    summary: "Meta's webhook subscription handshake (hub.verify_token must equal WHATSAPP_CLOUD_VERIFY_TOKEN)",
    query: WhatsAppCloudVerification,
    success: { status: 200, description: 'hub.challenge, echoed', body: z.string(), contentType: 'text/plain' },
    problems: { 403: ['invalid_verify_token'] },
  }),
  whatsappCloud: webhookApi.add({
    operationId: 'receiveWhatsAppCloudStatus',
    method: 'post',
    path: '/webhooks/whatsapp-cloud',
    auth: 'none',
    summary: 'WhatsApp Cloud API message status webhooks (X-Hub-Signature-256 under WHATSAPP_CLOUD_APP_SECRET)',
    description:
      'The signature covers the raw body and is checked first (403, nothing stored); a signed body that is not JSON is 400 `malformed`. Statuses (delivered, read, failed) are stored once; a status older than seven days is ignored.',
    body: WhatsAppCloudStatusUpdate,
    success: { status: 200, description: 'Handled', body: WhatsAppCloudWebhookAnswer },
    problems: { 400: ['malformed'], 403: ['invalid_signature'] },
  }),
  twilio: webhookApi.add({
    operationId: 'receiveTwilioStatus',
    method: 'post',
    path: TWILIO_WEBHOOK_PATH,
    auth: 'none',
    summary: 'Twilio message status callbacks (X-Twilio-Signature with TWILIO_AUTH_TOKEN over PUBLIC_BASE_URL/webhooks/twilio)',
    body: TwilioStatusCallback,
    bodyContentType: 'application/x-www-form-urlencoded',
    success: { status: 200, description: 'Handled', body: TwilioWebhookAnswer },
    description:
      'The signature is checked first (403), over the URL built from PUBLIC_BASE_URL, never the Host header; then a body other than form-encoded is 415. A replay of a status is 200 `duplicate`; a sid we never sent is 200 `unknown_message`.',
    problems: { 403: ['invalid_signature'], 415: ['unsupported_media_type'] },
  }),
}

/**
 * Provider delivery events (docs/delivery.md "Delivery feedback"). Mounted before the app's JSON parser: SNS posts its JSON
 * as `text/plain`, and its notifications (SES bounces carry the original headers) exceed 16 KiB.
 * Refusals are 4xx, which SNS does not retry; an authentic event for a message we do not know is
 * 200, because retrying it can never help (docs/operations.md).
 */
export function webhookRoutes(deps: WebhookDeps): Router {
  const router = apiRouter()
  const refused = (error: unknown): never => {
    if (error instanceof WebhookRefusedError) {
      throw new HttpProblemError(
        REFUSAL_STATUS[error.reason] ?? 403,
        error.reason,
        'The webhook delivery was refused.',
        error.reason === 'certificate_unavailable' ? { headers: { 'Retry-After': '30' } } : {},
      )
    }
    throw error
  }

  route(router, api.ses, express.text({ type: () => true, limit: '256kb' }), async (req, res) => {
    const body = typeof req.body === 'string' ? req.body : ''
    const outcome = await receiveSesWebhook(deps, body, req.get('x-amz-sns-message-type')).catch(refused)
    res.status(200).json({ outcome })
  })

  // Read as documented: JSON only, and the schema's required fields; the refusal waits for the signature check.
  route(router, api.wasender, express.json({ type: 'application/json', limit: '64kb' }), async (req, res) => {
    const parsed = WasenderStatusUpdate.safeParse(req.body)
    const delivery: WasenderDelivery = !req.is('application/json')
      ? { unreadable: 'unsupported_media_type' }
      : parsed.success
        ? { body: parsed.data }
        : { unreadable: 'malformed' }
    const outcomes = await receiveWasenderWebhook(deps, delivery, req.get('x-webhook-signature')).catch(refused)
    res.status(200).json({ outcomes })
  })

  route(router, api.whatsappCloudVerify, (req, res) => {
    const query = req.query as Record<string, unknown>
    const text = (name: string) => (typeof query[name] === 'string' ? query[name] : undefined)
    const challenge = (() => {
      try {
        return verifyWhatsAppCloudSubscription(deps, {
          mode: text('hub.mode'),
          verifyToken: text('hub.verify_token'),
          challenge: text('hub.challenge'),
        })
      } catch (error) {
        return refused(error)
      }
    })()
    res.status(200).type('text/plain').send(challenge)
  })

  // The raw bytes: Meta's signature covers the body exactly as sent.
  route(router, api.whatsappCloud, express.raw({ type: () => true, limit: '256kb' }), async (req, res) => {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)
    const outcomes = await receiveWhatsAppCloudWebhook(deps, raw, req.get('x-hub-signature-256')).catch(refused)
    res.status(200).json({ outcomes })
  })

  // Read as Twilio sends it: the form's pairs as they came, since the signature covers each of them.
  route(router, api.twilio, express.text({ type: 'application/x-www-form-urlencoded', limit: '16kb' }), async (req, res) => {
    const delivery: TwilioDelivery =
      req.is('application/x-www-form-urlencoded') && typeof req.body === 'string'
        ? { params: [...new URLSearchParams(req.body)] }
        : { unreadable: 'unsupported_media_type' }
    const outcome = await receiveTwilioWebhook(deps, delivery, req.get('x-twilio-signature')).catch(refused)
    res.status(200).json({ outcome })
  })

  return router
}
