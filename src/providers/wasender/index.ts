import { defineProvider } from '../definition.ts'
import { providerWebhook } from '../webhooks.ts'
import { createWasenderConnector } from './connector.ts'
import { FAULT_ANSWERS } from './faults.ts'
import { wasenderSettings, type WasenderConfig } from './settings.ts'
import { receiveWasenderWebhook, WasenderStatusUpdate, WasenderWebhookAnswer, type WasenderWebhookSettings } from './webhook.ts'

/** Message status updates, signed with WASENDER_WEBHOOK_SECRET (docs/delivery.md "Delivery feedback"). */
const webhook = providerWebhook<Pick<WasenderConfig, 'WASENDER_WEBHOOK_SECRET'>, WasenderWebhookSettings>(
  'wasender',
  (config) => (config.WASENDER_WEBHOOK_SECRET ? { secret: config.WASENDER_WEBHOOK_SECRET } : undefined),
  [
    {
      operationId: 'receiveWasenderStatus',
      method: 'post',
      path: '/webhooks/wasender',
      summary: 'Wasender message status updates (X-Webhook-Signature must equal WASENDER_WEBHOOK_SECRET)',
      description:
        'The signature is checked first (403); then a body other than `application/json` is 415 and one that does not match the schema is 400 `malformed`.',
      // Read as documented: JSON only, and the schema's required fields; the refusal waits for the signature check.
      read: 'json',
      limit: '64kb',
      body: WasenderStatusUpdate,
      answer: { body: WasenderWebhookAnswer, description: 'Handled' },
      refusals: ['malformed', 'invalid_signature', 'unsupported_media_type'],
      handle: async (deps, settings, request) => ({
        outcomes: await receiveWasenderWebhook(deps, settings, request.body, request.header('x-webhook-signature')),
      }),
    },
  ],
)

/** WhatsApp through Wasender, a WhatsApp-Web session linked by a QR code (docs/delivery.md "Channels"). */
export const wasender = defineProvider({
  id: 'wasender',
  channel: 'whatsapp',
  title: 'Wasender',
  settings: wasenderSettings,
  configured: (config) => config.WASENDER_API_URL !== undefined && config.WASENDER_API_KEY !== undefined,
  fromConfig(config) {
    if (!config.WASENDER_API_URL || !config.WASENDER_API_KEY)
      throw new Error('WASENDER_API_URL and WASENDER_API_KEY are required for Wasender')
    return createWasenderConnector({
      apiUrl: config.WASENDER_API_URL,
      apiKey: config.WASENDER_API_KEY,
      concurrency: config.WORKER_CONCURRENCY,
    })
  },
  faultAnswers: FAULT_ANSWERS,
  webhook,
})
