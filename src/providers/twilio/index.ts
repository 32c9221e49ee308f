import { randomBytes } from 'node:crypto'
import { publicBaseUrl } from '../../../config/schema.ts'
import { defineProvider } from '../definition.ts'
import { providerWebhook } from '../webhooks.ts'
import { createTwilioConnector } from './connector.ts'
import { startFakeTwilio } from './fake.ts'
import { FAULT_ANSWERS } from './faults.ts'
import { twilioConfigured, twilioSettings, type TwilioConfig } from './settings.ts'
import { TWILIO_WEBHOOK_PATH, twilioStatusCallbackUrl } from './signature.ts'
import { receiveTwilioWebhook, TwilioStatusCallback, TwilioWebhookAnswer, type TwilioWebhookSettings } from './webhook.ts'

/** Message status callbacks, signed with the auth token over the URL built from PUBLIC_BASE_URL (docs/delivery.md "Delivery feedback"). */
const webhook = providerWebhook<Pick<TwilioConfig, 'TWILIO_AUTH_TOKEN' | 'NODE_ENV' | 'PORT' | 'PUBLIC_BASE_URL'>, TwilioWebhookSettings>(
  'twilio',
  (config) =>
    config.TWILIO_AUTH_TOKEN
      ? { authToken: config.TWILIO_AUTH_TOKEN, callbackUrl: twilioStatusCallbackUrl(publicBaseUrl(config)) }
      : undefined,
  [
    {
      operationId: 'receiveTwilioStatus',
      method: 'post',
      path: TWILIO_WEBHOOK_PATH,
      summary: 'Twilio message status callbacks (X-Twilio-Signature with TWILIO_AUTH_TOKEN over PUBLIC_BASE_URL/webhooks/twilio)',
      description:
        'The signature is checked first (403), over the URL built from PUBLIC_BASE_URL, never the Host header; then a body other than form-encoded is 415. A replay of a status is 200 `duplicate`; a sid we never sent is 200 `unknown_message`.',
      // Read as Twilio sends it: the form's pairs as they came, since the signature covers each of them.
      read: 'form',
      limit: '16kb',
      body: TwilioStatusCallback,
      bodyContentType: 'application/x-www-form-urlencoded',
      answer: { body: TwilioWebhookAnswer, description: 'Handled' },
      refusals: ['invalid_signature', 'unsupported_media_type'],
      handle: async (deps, settings, request) => ({
        outcome: await receiveTwilioWebhook(deps, settings, request.body, request.header('x-twilio-signature')),
      }),
    },
  ],
)

/** SMS through Twilio's Programmable Messaging API (docs/delivery.md "Channels"). */
export const twilio = defineProvider({
  id: 'twilio',
  channel: 'sms',
  title: 'Twilio',
  settings: twilioSettings,
  configured: twilioConfigured,
  /** The connector of a complete TWILIO_* set (loadConfig refuses half of one). */
  fromConfig(config) {
    const { TWILIO_ACCOUNT_SID: accountSid, TWILIO_AUTH_TOKEN: authToken } = config
    if (!accountSid || !authToken) throw new Error('TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are required when any TWILIO_* is set')
    const apiKey =
      config.TWILIO_API_KEY_SID && config.TWILIO_API_KEY_SECRET
        ? { username: config.TWILIO_API_KEY_SID, password: config.TWILIO_API_KEY_SECRET }
        : undefined
    return createTwilioConnector({
      apiUrl: config.TWILIO_API_URL,
      accountSid,
      credentials: apiKey ?? { username: accountSid, password: authToken },
      sender: config.TWILIO_MESSAGING_SERVICE_SID
        ? { messagingServiceSid: config.TWILIO_MESSAGING_SERVICE_SID }
        : { from: config.TWILIO_FROM_NUMBER ?? '' },
      statusCallbackUrl: twilioStatusCallbackUrl(publicBaseUrl(config)),
      concurrency: config.WORKER_CONCURRENCY,
    })
  },
  faultAnswers: FAULT_ANSWERS,
  webhook,
  /**
   * `npm start` without Twilio: a local fake Twilio (a fresh account each start) that records into
   * the phone inbox and reports each message delivered to the local web's `/webhooks/twilio`, so
   * the sms channel works out of the box.
   */
  async dev(config, { inbox }) {
    if (twilioConfigured(config)) return null
    const account = {
      TWILIO_ACCOUNT_SID: `AC${randomBytes(16).toString('hex')}`,
      TWILIO_AUTH_TOKEN: randomBytes(16).toString('hex'),
      TWILIO_FROM_NUMBER: '+15005550006',
    }
    const fake = await startFakeTwilio({
      accountSid: account.TWILIO_ACCOUNT_SID,
      authToken: account.TWILIO_AUTH_TOKEN,
      inbox,
      autoDeliver: true,
    })
    return { worker: { ...account, TWILIO_API_URL: fake.url }, web: account, stop: () => fake.stop() }
  },
})
