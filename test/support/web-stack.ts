import { assertDocumentedAnswer } from './api-check.ts'
import type { Config } from '../../src/providers/config.ts'
import { createSesConnector } from '../../src/providers/ses/connector.ts'
import { createTwilioConnector } from '../../src/providers/twilio/connector.ts'
import { twilioStatusCallbackUrl } from '../../src/providers/twilio/signature.ts'
import { createWasenderConnector } from '../../src/providers/wasender/connector.ts'
import { createWhatsAppCloudConnector } from '../../src/providers/whatsapp-cloud/connector.ts'
import { startFakeWhatsAppCloud } from '../../src/providers/whatsapp-cloud/fake.ts'
import { createPhoneInbox } from '../../src/providers/phone-inbox.ts'
import type { Resolve } from '../../src/platform/webhook-address-guard.ts'
import type { Logger } from '../../src/logging/logger.ts'
import type { Keys } from '../../src/runtime/dev-keys.ts'
import { startFakeTwilio, type FakeTwilio } from '../../src/providers/twilio/fake.ts'
import { startSesEmulator } from '../../src/providers/ses/emulator.ts'
import { startWeb, type RunningWeb } from '../../src/runtime/web.ts'
import { startWorker, type RunningWorker } from '../../src/runtime/worker.ts'
import { registerChannelsAsWorker } from './channels.ts'
import { createTestDatabase, type TestDatabase } from './database.ts'
import { startFakeWasender } from '../../src/providers/wasender/fake.ts'
import { capturingLogger, testKeys, workerConfig } from './helpers.ts'

/** The fake Twilio account of a stack started with `sms: true`, and the public origin its callbacks are signed for. */
export const TWILIO_STACK = {
  accountSid: `AC${'5'.repeat(32)}`,
  authToken: 'twilio-stack-auth-token',
  publicBaseUrl: 'https://sealpost.example',
}

/** Web and (optionally) worker in this process against one test database, the SES emulator and the fake Wasender. */
export async function startWebStack(
  db: TestDatabase,
  options: {
    keys: Keys
    logger: Logger
    clock?: () => Date
    worker?: boolean
    whatsapp?: boolean
    /** WhatsApp through the fake Cloud API (`stack.cloud`, its `stack.phoneInbox`) instead of the fake Wasender. */
    whatsappCloud?: boolean
    /** SMS through the fake Twilio (its callbacks signed for `TWILIO_STACK.publicBaseUrl`); off unless asked. */
    sms?: boolean
    /** The web's PHONE_CHANNELS (unset unless given). */
    phoneChannels?: ('whatsapp' | 'sms')[]
    clientLimitPerMinute?: number
    trustProxy?: boolean | number | string[]
    invitationTtlSeconds?: number
    invitationLinkBaseUrl?: string
    metricsToken?: string
    /** Delivery-feedback settings of the web (webhooks, DEFAULT_LOCALE) and how it confirms SNS subscriptions. */
    webhooks?: Partial<
      Pick<
        Config,
        | 'SES_EVENTS_TOPIC_ARN'
        | 'SNS_TEST_SIGNING_CERT'
        | 'WASENDER_WEBHOOK_SECRET'
        | 'DEFAULT_LOCALE'
        | 'WHATSAPP_CLOUD_APP_SECRET'
        | 'WHATSAPP_CLOUD_VERIFY_TOKEN'
        | 'TWILIO_AUTH_TOKEN'
        | 'PUBLIC_BASE_URL'
        | 'SUPABASE_HOOK_SECRET'
        | 'SUPABASE_VERIFY_PATH'
        | 'SUPABASE_EMAIL_CONTENT'
        | 'SUPABASE_EMAIL_OTP_EXPIRY_SECONDS'
        | 'SUPABASE_SMS_OTP_EXPIRY_SECONDS'
        | 'KRATOS_COURIER_API_KEY'
        | 'SUPABASE_LINK_ORIGINS'
        | 'KRATOS_LINK_ORIGINS'
        | 'HOOK_DESTINATION_HOURLY_BUDGET'
      >
    >
    confirmSubscription?: (url: string) => Promise<void>
    /** The breached-password lookup (off unless given: test/support/fake-pwned-passwords.ts). */
    passwords?: Partial<Pick<Config, 'BREACHED_PASSWORD_API_URL' | 'BREACHED_PASSWORD_TIMEOUT_MS'>>
    /** Webhook endpoints: WEBHOOK_ALLOWED_HOSTS and how their hosts resolve (the SSRF guard's seam). */
    events?: { allowedHosts?: string[]; resolve?: Resolve }
  },
) {
  const emulator = await startSesEmulator(0)
  const wasender = await startFakeWasender('stack-key')
  const phoneInbox = createPhoneInbox()
  const twilio: FakeTwilio | undefined = options.sms
    ? await startFakeTwilio({ accountSid: TWILIO_STACK.accountSid, authToken: TWILIO_STACK.authToken, inbox: phoneInbox })
    : undefined
  const cloud = await startFakeWhatsAppCloud({
    accessToken: 'stack-token',
    phoneNumberId: '1055500000',
    template: 'stack_code',
    inbox: phoneInbox,
  })
  let worker: RunningWorker | undefined
  const whatsapp = options.whatsapp ?? true
  const whatsappConnector = options.whatsappCloud
    ? createWhatsAppCloudConnector({
        apiUrl: cloud.url,
        accessToken: 'stack-token',
        phoneNumberId: '1055500000',
        template: 'stack_code',
        languages: 'en:en_US,de:de,es:es',
      })
    : createWasenderConnector({ apiUrl: wasender.url, apiKey: 'stack-key' })
  const connectors = [
    emulatorSesConnector(emulator.url),
    ...(whatsapp ? [whatsappConnector] : []),
    ...(twilio
      ? [
          createTwilioConnector({
            apiUrl: twilio.url,
            accountSid: TWILIO_STACK.accountSid,
            credentials: { username: TWILIO_STACK.accountSid, password: TWILIO_STACK.authToken },
            sender: { from: '+15005550006' },
            statusCallbackUrl: twilioStatusCallbackUrl(TWILIO_STACK.publicBaseUrl),
          }),
        ]
      : []),
  ]
  // The web learns its channels from the workers' registrations: registered as a worker would, so
  // a stack without a worker (or with one on an injected clock) offers the same ones.
  await registerChannelsAsWorker(
    db.owner,
    [...(['email'] as const), ...(whatsapp ? (['whatsapp'] as const) : []), ...(twilio ? (['sms'] as const) : [])],
    options.clock?.(),
  )
  if (options.worker ?? true) {
    worker = await startWorker({
      config: workerConfig({ INVITATION_LINK_BASE_URL: options.invitationLinkBaseUrl ?? 'https://app.sealpost.test' }),
      workerUrl: db.workerUrl,
      keys: options.keys,
      providers: connectors,
      logger: options.logger,
    })
  }
  const web: RunningWeb = await startWeb({
    config: {
      NODE_ENV: 'test',
      METRICS_TOKEN: options.metricsToken,
      PORT: 0,
      CHALLENGE_TTL_SECONDS: 600,
      INVITATION_TTL_SECONDS: options.invitationTtlSeconds ?? 3_600,
      CLIENT_RATE_LIMIT_PER_MINUTE: options.clientLimitPerMinute ?? 10_000,
      TRUST_PROXY: options.trustProxy,
      ...options.webhooks,
      ...options.passwords,
      WEBHOOK_ALLOWED_HOSTS: options.events?.allowedHosts ?? [],
      ...(options.phoneChannels ? { PHONE_CHANNELS: options.phoneChannels } : {}),
    },
    confirmSubscription: options.confirmSubscription,
    resolve: options.events?.resolve,
    apiUrl: db.apiUrl,
    keys: options.keys,
    logger: options.logger,
    clock: options.clock,
    host: '127.0.0.1',
  })

  /** JSON request to the API; returns status, headers and parsed body. */
  async function rawCall(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${web.url}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    })
    const text = await response.text()
    return {
      status: response.status,
      headers: response.headers,
      text,
      body: (text ? JSON.parse(text) : undefined) as Record<string, unknown> | undefined,
    }
  }

  /** rawCall, with the answer checked against the API document first: the description cannot drift from the behaviour. */
  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const { text, ...answer } = await rawCall(method, path, body, headers)
    assertDocumentedAnswer({ method, url: path }, { status: answer.status, headers: answer.headers, text })
    return answer
  }

  return {
    web,
    emulator,
    wasender,
    cloud,
    phoneInbox,
    /** The fake Twilio when the stack was started with `sms: true`. */
    twilio,
    call,
    /** Unchecked: only for answers a test provokes on purpose outside the contract (a booby-trapped database). */
    rawCall,
    bearer: (token: unknown) => ({ authorization: `Bearer ${String(token)}` }),
    async stop() {
      await web.stop()
      await worker?.stop()
      for (const connector of connectors) connector.close()
      if (!whatsapp) whatsappConnector.close()
      await wasender.stop()
      await cloud.stop()
      await twilio?.stop()
      await emulator.stop()
    },
  }
}

/** An SES connector that sends to the emulator at `url` (the stack's, or a test's own). */
export function emulatorSesConnector(url: string) {
  return createSesConnector({
    region: 'us-east-1',
    fromAddress: 'no-reply@sealpost.test',
    endpoint: url,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  })
}

/** Registers before/after hooks for a test database and a web stack on it; read the fields inside tests. */
export function useWebStack(options: Omit<Parameters<typeof startWebStack>[1], 'keys' | 'logger'> = {}) {
  let db: TestDatabase
  let stack: Awaited<ReturnType<typeof startWebStack>>
  const keys = testKeys()
  const logs = capturingLogger()
  before(async () => {
    db = await createTestDatabase()
    stack = await startWebStack(db, { keys, logger: logs.logger, ...options })
  })
  after(async () => {
    await stack?.stop()
    await db?.drop()
  })
  return {
    keys,
    logs,
    /** A worker of its own on the stack's database, sending email to the stack's emulator; the caller stops it. */
    startWorker: (config: Parameters<typeof workerConfig>[0] = {}) =>
      startWorker({
        config: workerConfig(config),
        workerUrl: db.workerUrl,
        keys,
        logger: logs.logger,
        providers: [emulatorSesConnector(stack.emulator.url)],
      }),
    get db() {
      return db
    },
    get stack() {
      return stack
    },
  }
}
