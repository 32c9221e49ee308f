import { randomBytes } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { twilioConfigured, type Config } from '../../config/schema.ts'
import { startEmbeddedPostgres } from '../db/embedded.ts'
import { ensureLoginUsers } from '../db/login-users.ts'
import { databaseRoles } from '../db/roles.ts'
import { release } from '../db/release.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { ensureDevKeys, keysFromRings, type Keys } from './dev-keys.ts'
import { whatsAppProvider } from '../../config/whatsapp-cloud.ts'
import { startFakeWhatsAppCloud } from '../providers/whatsapp-cloud/fake.ts'
import { startFakeTwilio } from '../providers/twilio/fake.ts'
import { createPhoneInbox, type PhoneInbox } from '../providers/phone-inbox.ts'
import { providersFromConfig } from './providers.ts'
import { startSesEmulator } from '../providers/ses/emulator.ts'
import { DEV_TOPIC_ARN, devSnsSigner } from '../providers/ses/dev-sns-signer.ts'
import { startWeb } from './web.ts'
import { startWorker } from './worker.ts'

export type DevStack = {
  apiUrl: string
  apiBound: string
  inboxUrl: string | null
  /** What the local phone-provider fakes accepted (the phone inbox view). */
  phoneInbox: PhoneInbox
  stop: () => Promise<void>
}

// The local fake Cloud API's account: fixed, development-only values that open nothing real.
const DEV_CLOUD = { accessToken: 'dev-cloud-access-token', phoneNumberId: '1055500000', template: 'sealpost_code' }
const DEV_CLOUD_APP_SECRET = 'dev-cloud-app-secret-not-secret'

/**
 * WhatsApp of `npm start` when no WhatsApp provider is configured: the local fake Cloud API
 * (recording into `inbox`), the settings that point the connector at it, and the web's app secret
 * so the fake's signed status webhooks are accepted once `subscribe` names the web.
 */
async function devWhatsApp(config: Config, inbox: PhoneInbox) {
  if (whatsAppProvider(config) !== null) return { worker: {}, web: {}, subscribe: () => undefined, stop: async () => undefined }
  const fake = await startFakeWhatsAppCloud({ ...DEV_CLOUD, inbox })
  return {
    worker: {
      WHATSAPP_PROVIDER: 'cloud',
      WHATSAPP_CLOUD_API_URL: fake.url,
      WHATSAPP_CLOUD_ACCESS_TOKEN: DEV_CLOUD.accessToken,
      WHATSAPP_CLOUD_PHONE_NUMBER_ID: DEV_CLOUD.phoneNumberId,
      WHATSAPP_CLOUD_TEMPLATE: DEV_CLOUD.template,
    } satisfies Partial<Config>,
    web: { WHATSAPP_CLOUD_APP_SECRET: DEV_CLOUD_APP_SECRET } satisfies Partial<Config>,
    subscribe: (webUrl: string) => fake.subscribe(`${webUrl}/webhooks/whatsapp-cloud`, DEV_CLOUD_APP_SECRET),
    stop: () => fake.stop(),
  }
}

/**
 * The Twilio settings of `npm start`: the configured ones, else a local fake Twilio (a fresh
 * account each start) that records into `inbox` and reports each message delivered to the local
 * web's `/webhooks/twilio`, so the sms channel works out of the box.
 */
async function devTwilio(config: Config, inbox: PhoneInbox, stops: (() => Promise<void>)[]): Promise<Partial<Config>> {
  if (twilioConfigured(config)) return {}
  const settings = {
    TWILIO_ACCOUNT_SID: `AC${randomBytes(16).toString('hex')}`,
    TWILIO_AUTH_TOKEN: randomBytes(16).toString('hex'),
    TWILIO_FROM_NUMBER: '+15005550006',
  }
  const fake = await startFakeTwilio({
    accountSid: settings.TWILIO_ACCOUNT_SID,
    authToken: settings.TWILIO_AUTH_TOKEN,
    inbox,
    autoDeliver: true,
  })
  stops.push(() => fake.stop())
  return { ...settings, TWILIO_API_URL: fake.url }
}

/**
 * The SES event settings of `npm start`: the configured ones, else a local topic and a certificate
 * made on first start (through a dev dependency: without it, events are simply off).
 */
async function devSesEvents(config: Config, logger: Logger): Promise<Pick<Config, 'SES_EVENTS_TOPIC_ARN' | 'SNS_TEST_SIGNING_CERT'>> {
  if (config.SNS_TEST_SIGNING_CERT || config.SES_EVENTS_TOPIC_ARN)
    return { SES_EVENTS_TOPIC_ARN: config.SES_EVENTS_TOPIC_ARN, SNS_TEST_SIGNING_CERT: config.SNS_TEST_SIGNING_CERT }
  try {
    return { SES_EVENTS_TOPIC_ARN: DEV_TOPIC_ARN, SNS_TEST_SIGNING_CERT: (await devSnsSigner(config.SEALPOST_DATA_DIR)).certificatePath }
  } catch (error) {
    logger.warn('no local SNS signing certificate: POST /webhooks/ses refuses everything in this run', describeError(error))
    return {}
  }
}

/** Where `npm run dev:identity` finds the embedded database `npm start` is running. */
export function runtimeFile(dataDir: string): string {
  return path.join(dataDir, 'runtime.json')
}

/**
 * `npm start`: embedded PostgreSQL unless DATABASE_URL is set, the release step, the SES emulator
 * unless SES is configured, the fake WhatsApp Cloud API unless a WhatsApp provider is, the fake
 * Twilio unless Twilio is, then web and worker in this one process, each on its own role.
 */
export async function startDevStack(config: Config, logger: Logger): Promise<DevStack> {
  const stops: (() => Promise<void>)[] = []
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
  }
  try {
    let ownerUrl = config.DATABASE_URL
    if (!ownerUrl) {
      const embedded = await startEmbeddedPostgres({ dataDir: config.SEALPOST_DATA_DIR, database: 'sealpost', logger })
      stops.push(embedded.stop)
      ownerUrl = embedded.ownerUrl
      await writeFile(runtimeFile(config.SEALPOST_DATA_DIR), JSON.stringify({ databaseUrl: ownerUrl }), { mode: 0o600 })
    }
    const keys: Keys =
      config.OUTBOX_ENCRYPTION_KEYS && config.CODE_HASH_KEYS
        ? keysFromRings(config.OUTBOX_ENCRYPTION_KEYS, config.CODE_HASH_KEYS)
        : await ensureDevKeys(config.SEALPOST_DATA_DIR)
    await release(ownerUrl, config, logger)
    const { apiUrl, workerUrl } =
      config.API_DATABASE_URL && config.WORKER_DATABASE_URL
        ? { apiUrl: config.API_DATABASE_URL, workerUrl: config.WORKER_DATABASE_URL }
        : await ensureLoginUsers(ownerUrl, databaseRoles(config))

    let inboxUrl: string | null = null
    if (!config.SES_ENDPOINT && !config.SES_REGION) {
      const emulator = await startSesEmulator(config.SES_EMULATOR_PORT)
      stops.push(emulator.stop)
      inboxUrl = emulator.url
    }
    // The local phone fakes record into it; the web shows it (development only, this machine only).
    const phoneInbox = createPhoneInbox()
    const whatsApp = await devWhatsApp(config, phoneInbox)
    stops.push(whatsApp.stop)
    const twilio = await devTwilio(config, phoneInbox, stops)
    const providers = providersFromConfig({ ...config, ...whatsApp.worker, ...twilio }, inboxUrl ?? undefined)
    stops.push(async () => providers.forEach((provider) => provider.close()))
    const worker = await startWorker({ config: { ...config, ...twilio }, workerUrl, keys, providers, logger })
    stops.push(worker.stop)
    // Development: SES events from `npm run dev:ses-event`, signed with a local key (docs/delivery.md "Delivery feedback").
    const events = await devSesEvents(config, logger)
    const web = await startWeb({
      config: { ...config, ...twilio, ...events, ...whatsApp.web },
      apiUrl,
      keys,
      logger,
      developmentPages: { inboxUrl, phoneInbox },
    })
    stops.push(web.stop)
    whatsApp.subscribe(web.url)
    if (!config.DATABASE_URL)
      await writeFile(
        runtimeFile(config.SEALPOST_DATA_DIR),
        JSON.stringify({ databaseUrl: ownerUrl, apiUrl: web.url, sesEventsTopicArn: events.SES_EVENTS_TOPIC_ARN }),
        { mode: 0o600 },
      )
    return { apiUrl: web.url, apiBound: web.bound, inboxUrl, phoneInbox, stop: stopAll }
  } catch (error) {
    await stopAll()
    throw error
  }
}
