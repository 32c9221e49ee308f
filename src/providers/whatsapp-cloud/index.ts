import { z } from 'zod'
import { defineProvider } from '../definition.ts'
import { providerWebhook, WebhookOutcomeSchema } from '../webhooks.ts'
import { createWhatsAppCloudConnector } from './connector.ts'
import { startFakeWhatsAppCloud } from './fake.ts'
import { FAULT_ANSWERS } from './faults.ts'
import { CLOUD_SENDING, whatsAppCloudSettings, type WhatsAppCloudConfig } from './settings.ts'
import { receiveWhatsAppCloudWebhook, verifyWhatsAppCloudSubscription, type WhatsAppCloudWebhookSettings } from './webhook.ts'

const StatusUpdate = z
  .object({
    object: z.string().describe('whatsapp_business_account'),
    entry: z.array(z.unknown()).describe('[{id, changes: [{field: "messages", value: {statuses: [{id, status, timestamp, errors?}]}}]}]'),
  })
  .describe(
    'WhatsApp Cloud API webhook; X-Hub-Signature-256 must be sha256=<hex HMAC-SHA256 of the raw body under WHATSAPP_CLOUD_APP_SECRET>',
  )
const Verification = z.object({
  'hub.mode': z.string().optional().describe('subscribe'),
  'hub.verify_token': z.string().optional().describe('must equal WHATSAPP_CLOUD_VERIFY_TOKEN'),
  'hub.challenge': z.string().optional().describe('echoed back as text/plain'),
})

/** Meta's subscription handshake and its signed status webhooks (docs/delivery.md "WhatsApp Cloud API"). */
const webhook = providerWebhook<
  Pick<WhatsAppCloudConfig, 'WHATSAPP_CLOUD_APP_SECRET' | 'WHATSAPP_CLOUD_VERIFY_TOKEN'>,
  WhatsAppCloudWebhookSettings
>('whatsapp_cloud', (config) => ({ appSecret: config.WHATSAPP_CLOUD_APP_SECRET, verifyToken: config.WHATSAPP_CLOUD_VERIFY_TOKEN }), [
  {
    operationId: 'verifyWhatsAppCloudSubscription',
    method: 'get',
    path: '/webhooks/whatsapp-cloud',
    summary: "Meta's webhook subscription handshake (hub.verify_token must equal WHATSAPP_CLOUD_VERIFY_TOKEN)",
    read: 'none',
    query: Verification,
    answer: { body: z.string(), description: 'hub.challenge, echoed', contentType: 'text/plain' },
    refusals: ['invalid_verify_token'],
    handle: async (deps, settings, request) =>
      verifyWhatsAppCloudSubscription(
        { ...deps, whatsappCloud: settings },
        { mode: request.query('hub.mode'), verifyToken: request.query('hub.verify_token'), challenge: request.query('hub.challenge') },
      ),
  },
  {
    operationId: 'receiveWhatsAppCloudStatus',
    method: 'post',
    path: '/webhooks/whatsapp-cloud',
    summary: 'WhatsApp Cloud API message status webhooks (X-Hub-Signature-256 under WHATSAPP_CLOUD_APP_SECRET)',
    description:
      'The signature covers the raw body and is checked first (403, nothing stored); a signed body that is not JSON is 400 `malformed`. Statuses (delivered, read, failed) are stored once; a status older than seven days is ignored.',
    // The raw bytes: Meta's signature covers the body exactly as sent, up to the 3 MB Meta's webhooks may carry.
    read: 'raw',
    limit: '3mb',
    body: StatusUpdate,
    answer: { body: z.object({ outcomes: z.array(WebhookOutcomeSchema) }), description: 'Handled' },
    refusals: ['malformed', 'invalid_signature'],
    handle: async (deps, settings, request) => ({
      outcomes: await receiveWhatsAppCloudWebhook(
        { ...deps, whatsappCloud: settings },
        request.body,
        request.header('x-hub-signature-256'),
      ),
    }),
  },
])

// The local fake Cloud API's account of `npm start`: fixed, development-only values that open nothing real.
const DEV_ACCOUNT = { accessToken: 'dev-cloud-access-token', phoneNumberId: '1055500000', template: 'sealpost_code' }
const DEV_APP_SECRET = 'dev-cloud-app-secret-not-secret'

/** WhatsApp through Meta's official Cloud API: codes only, as an authentication template (docs/delivery.md "WhatsApp Cloud API"). */
export const whatsappCloud = defineProvider({
  id: 'whatsapp_cloud',
  channel: 'whatsapp',
  title: 'WhatsApp Cloud API',
  choice: 'cloud',
  settings: whatsAppCloudSettings,
  configured: (config) => CLOUD_SENDING.every((name) => config[name] !== undefined),
  fromConfig(config) {
    const {
      WHATSAPP_CLOUD_ACCESS_TOKEN: accessToken,
      WHATSAPP_CLOUD_PHONE_NUMBER_ID: phoneNumberId,
      WHATSAPP_CLOUD_TEMPLATE: template,
    } = config
    if (!accessToken || !phoneNumberId || !template) throw new Error(`${CLOUD_SENDING.join(', ')} are required for the WhatsApp Cloud API`)
    return createWhatsAppCloudConnector({
      apiUrl: config.WHATSAPP_CLOUD_API_URL,
      accessToken,
      phoneNumberId,
      template,
      languages: config.WHATSAPP_CLOUD_TEMPLATE_LANGUAGES,
      concurrency: config.WORKER_CONCURRENCY,
    })
  },
  faultAnswers: FAULT_ANSWERS,
  webhook,
  /**
   * `npm start` with no WhatsApp provider configured: the local fake Cloud API (recording into the
   * phone inbox), the settings that point the connector at it, and the web's app secret so the
   * fake's signed status webhooks are accepted once it knows where the web listens.
   */
  async dev(_config, { inbox, channelConfigured }) {
    if (channelConfigured) return null
    const fake = await startFakeWhatsAppCloud({ ...DEV_ACCOUNT, inbox })
    return {
      worker: {
        WHATSAPP_PROVIDER: 'cloud',
        WHATSAPP_CLOUD_API_URL: fake.url,
        WHATSAPP_CLOUD_ACCESS_TOKEN: DEV_ACCOUNT.accessToken,
        WHATSAPP_CLOUD_PHONE_NUMBER_ID: DEV_ACCOUNT.phoneNumberId,
        WHATSAPP_CLOUD_TEMPLATE: DEV_ACCOUNT.template,
      },
      web: { WHATSAPP_CLOUD_APP_SECRET: DEV_APP_SECRET },
      webStarted: (webUrl) => fake.subscribe(`${webUrl}/webhooks/whatsapp-cloud`, DEV_APP_SECRET),
      stop: () => fake.stop(),
    }
  },
})
