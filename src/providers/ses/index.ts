import { describeError } from '../../logging/logger.ts'
import { defineProvider } from '../definition.ts'
import { providerWebhook } from '../webhooks.ts'
import { createSesConnector } from './connector.ts'
import { DEV_TOPIC_ARN, devSnsSigner } from './dev-sns-signer.ts'
import { startSesEmulator } from './emulator.ts'
import { FAULT_ANSWERS } from './faults.ts'
import { DEV_FROM_ADDRESS, sesSettings, type SesSettings } from './settings.ts'
import { fetchedCertificates, fileCertificate } from './sns-verifier.ts'
import { receiveSesWebhook, SES_REFUSALS, SesWebhookAnswer, SnsDelivery, type SesWebhookSettings } from './webhook.ts'

/** SES events through the SNS topic SES_EVENTS_TOPIC_ARN (docs/delivery.md "Delivery feedback"). */
const webhook = providerWebhook<Pick<SesSettings, 'SES_EVENTS_TOPIC_ARN' | 'SNS_TEST_SIGNING_CERT'>, SesWebhookSettings>(
  'ses',
  (config, seams) =>
    config.SES_EVENTS_TOPIC_ARN
      ? {
          topicArn: config.SES_EVENTS_TOPIC_ARN,
          certificates: config.SNS_TEST_SIGNING_CERT ? fileCertificate(config.SNS_TEST_SIGNING_CERT) : fetchedCertificates(),
          confirmSubscription: seams.confirmSubscription,
        }
      : undefined,
  [
    {
      operationId: 'receiveSesEvent',
      method: 'post',
      path: '/webhooks/ses',
      summary: 'Amazon SNS deliveries of SES events (signature verified; subscriptions confirmed only for SES_EVENTS_TOPIC_ARN)',
      description:
        'SNS posts JSON as text/plain with x-amz-sns-message-type. Refusals (4xx) are final for SNS; an authentic event for a message we do not know is 200 unknown_message; a certificate that cannot be fetched is 503 so SNS retries.',
      // SES bounces carry the original headers: beyond the API's 16 KiB.
      read: 'text',
      limit: '256kb',
      body: SnsDelivery,
      bodyContentType: 'text/plain',
      answer: { body: SesWebhookAnswer, description: 'Handled' },
      refusals: SES_REFUSALS,
      handle: async (deps, settings, request) => ({
        outcome: await receiveSesWebhook(deps, settings, request.body, request.header('x-amz-sns-message-type')),
      }),
    },
  ],
)

/** Email through Amazon SES v2 (docs/delivery.md "Channels"). */
export const ses = defineProvider({
  id: 'ses',
  channel: 'email',
  title: 'Amazon SES',
  settings: sesSettings,
  configured: (config) => config.SES_REGION !== undefined || config.SES_ENDPOINT !== undefined,
  fromConfig(config) {
    const local = config.NODE_ENV === 'development' || config.NODE_ENV === 'test'
    return createSesConnector({
      region: config.SES_REGION ?? 'us-east-1',
      fromAddress: config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
      fromName: config.SES_FROM_NAME ?? config.PRODUCT_NAME,
      configurationSet: config.SES_CONFIGURATION_SET,
      endpoint: config.SES_ENDPOINT ?? (local ? `http://127.0.0.1:${config.SES_EMULATOR_PORT}` : undefined),
      // The emulator accepts any credentials; real SES uses the default AWS credential chain.
      credentials: local && !config.SES_REGION ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined,
      concurrency: config.WORKER_CONCURRENCY,
    })
  },
  faultAnswers: FAULT_ANSWERS,
  webhook,
  /**
   * `npm start` without SES settings: the SES emulator (its inbox at `inboxUrl`), and without an
   * events topic, a local topic whose certificate is made on first start (through a dev
   * dependency: without it, events are simply off).
   */
  async dev(config, { logger }) {
    const emulator = config.SES_ENDPOINT || config.SES_REGION ? undefined : await startSesEmulator(config.SES_EMULATOR_PORT)
    let events = {}
    if (!config.SNS_TEST_SIGNING_CERT && !config.SES_EVENTS_TOPIC_ARN) {
      try {
        events = {
          SES_EVENTS_TOPIC_ARN: DEV_TOPIC_ARN,
          SNS_TEST_SIGNING_CERT: (await devSnsSigner(config.SEALPOST_DATA_DIR)).certificatePath,
        }
      } catch (error) {
        logger.warn('no local SNS signing certificate: POST /webhooks/ses refuses everything in this run', describeError(error))
      }
    }
    return {
      worker: emulator ? { SES_ENDPOINT: emulator.url } : {},
      web: events,
      ...(emulator ? { inboxUrl: emulator.url } : {}),
      stop: async () => await emulator?.stop(),
    }
  },
})
