import type { Express } from 'express'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { resolveWithDns, type Resolve } from '../platform/webhook-address-guard.ts'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { apiDocsEnabled, type CoreConfig as Config } from '../../config/schema.ts'
import { createBoss } from '../db/boss.ts'
import { assertConnectionRole } from '../db/connection-guard.ts'
import { createKnex } from '../db/knex.ts'
import { loadEnvelopeNegotiation, type EnvelopeNegotiation } from '../outbox/envelope-negotiation.ts'
import { waitForDatabase } from '../db/unavailable.ts'
import { databaseRoles } from '../db/roles.ts'
import { createApp, type WebDeps } from '../http/app.ts'
import type { DevelopmentPages } from '../http/pages.ts'
import { answerClientError } from '../http/client-error.ts'
import { rememberPeerAddress } from '../http/client-limit.ts'
import { metricsAccess } from '../metrics/access.ts'
import { loadChannelDirectory, type ChannelDirectory } from '../outbox/channel-directory.ts'
import type { Logger } from '../logging/logger.ts'
import type { Keys } from './dev-keys.ts'
import { bindWebhooks, type WebhookConfig } from '../providers/wiring.ts'
import { createBreachedPasswordCheck } from '../identity/breached-passwords.ts'
import type { BreachedPasswordCheck } from '../identity/password-policy.ts'
import { signingKeyOf } from '../hooks/standard-webhooks.ts'
import { traceContextOnlyFrom } from '../http/trace-context-guard.ts'
import { hookSettings } from './web-hooks.ts'

export type RunningWeb = {
  /** A URL that reaches the web from this machine. */
  url: string
  /** What it binds, `host:port` (`0.0.0.0:3000`: every interface). */
  bound: string
  server: Server
  /** The channels the web offers (refreshed every 5 s); `refresh()` reads them now. */
  channels: Pick<ChannelDirectory, 'has' | 'refresh'>
  /** The format negotiation (refreshed every 5 s, docs/upgrading.md "Format negotiation"); `refresh()` takes its census now. */
  formats: Pick<EnvelopeNegotiation, 'refresh'>
  stop: () => Promise<void>
}

/** What the web process is started with: its settings, its database URL and keys, and the tests' seams. */
type WebOptions = {
  config: Pick<
    Config,
    'NODE_ENV' | 'PORT' | 'CHALLENGE_TTL_SECONDS' | 'INVITATION_TTL_SECONDS' | 'CLIENT_RATE_LIMIT_PER_MINUTE' | 'METRICS_TOKEN'
  > &
    Partial<Pick<Config, 'TRUST_PROXY' | 'DATABASE_WAIT_SECONDS' | 'SEALPOST_API_ROLE' | 'SEALPOST_WORKER_ROLE' | 'API_DOCS'>> &
    Partial<Pick<Config, 'DEFAULT_LOCALE'>> &
    // Every provider's webhook settings (secrets, topics, the public origin): src/providers/wiring.ts.
    WebhookConfig &
    Partial<Pick<Config, 'BREACHED_PASSWORD_API_URL' | 'BREACHED_PASSWORD_TIMEOUT_MS' | 'ENVELOPE_VERSION' | 'PHONE_CHANNELS'>> &
    Partial<Pick<Config, 'PHONE_ALLOW_FIXED_LINE' | 'PHONE_ALLOW_VOIP' | 'SMS_ALLOWED_COUNTRIES'>> &
    Partial<Pick<Config, 'WEBHOOK_ALLOWED_HOSTS'>> &
    Partial<Pick<Config, 'SUPABASE_HOOK_SECRET' | 'KRATOS_COURIER_API_KEY' | 'TRACE_TRUSTED_CALLERS'>> &
    Partial<Pick<Config, 'SUPABASE_LINK_ORIGINS' | 'KRATOS_LINK_ORIGINS' | 'HOOK_DESTINATION_HOURLY_BUDGET'>> &
    Partial<Pick<Config, 'SUPABASE_VERIFY_PATH' | 'SUPABASE_EMAIL_CONTENT'>> &
    Partial<Pick<Config, 'SUPABASE_EMAIL_OTP_EXPIRY_SECONDS' | 'SUPABASE_SMS_OTP_EXPIRY_SECONDS'>>
  apiUrl: string
  keys: Keys
  logger: Logger
  clock?: () => Date
  host?: string
  /** `npm start` only: the development index at `/` (naming the emulator's inbox) and `/join`. */
  developmentPages?: Omit<DevelopmentPages, 'apiDocs'>
  /** Tests: how a confirmed SNS subscription's SubscribeURL is visited (default: an HTTPS GET). */
  confirmSubscription?: (url: string) => Promise<void>
  /** Tests: how webhook endpoint hosts resolve (default: DNS), the seam the worker's send-time check shares. */
  resolve?: Resolve
}

/** What the app's use cases share, opened before the first request: the pool, pg-boss, the fleet's channels, the envelope version. */
type WebParts = {
  db: Knex
  boss: PgBoss
  channels: ChannelDirectory
  envelopeVersion: EnvelopeNegotiation['version']
  renderedPurpose: EnvelopeNegotiation['renders']
  breached: BreachedPasswordCheck | undefined
  clock: () => Date
}

/** The app's dependencies from the settings (src/http/app.ts `WebDeps`). */
function webDeps(options: WebOptions, { db, boss, channels, envelopeVersion, renderedPurpose, breached, clock }: WebParts): WebDeps {
  const { config, logger, keys } = options
  const supabaseSigningKey = config.SUPABASE_HOOK_SECRET ? signingKeyOf(config.SUPABASE_HOOK_SECRET) : null
  const sealing = {
    boss,
    outboxKey: keys.outboxKey,
    codeHashKey: keys.codeHashKey,
    codeHashKeys: keys.codeHashKeys,
    clock,
    logger,
    envelopeVersion,
  }
  return {
    db,
    logger,
    invitations: { ...sealing, invitationTtlSeconds: config.INVITATION_TTL_SECONDS },
    challenges: {
      ...sealing,
      challengeTtlSeconds: config.CHALLENGE_TTL_SECONDS,
      // Only channels a worker can deliver; a phone identifier without one is refused up front.
      channels,
      // Which numbers a code may go to at all (docs/delivery.md "Phone numbers").
      phoneNumbers: {
        allowFixedLine: config.PHONE_ALLOW_FIXED_LINE === 'true',
        allowVoip: config.PHONE_ALLOW_VOIP === 'true',
        ...(config.SMS_ALLOWED_COUNTRIES ? { smsCountries: config.SMS_ALLOWED_COUNTRIES } : {}),
      },
      ...(config.PHONE_CHANNELS ? { phoneChannels: config.PHONE_CHANNELS } : {}),
    },
    clientLimitPerMinute: config.CLIENT_RATE_LIMIT_PER_MINUTE,
    webhookAddresses: {
      production: config.NODE_ENV === 'production',
      allowedHosts: config.WEBHOOK_ALLOWED_HOSTS ?? [],
      resolve: options.resolve ?? resolveWithDns,
    },
    metrics: metricsAccess(config),
    trustProxy: config.TRUST_PROXY,
    apiDocs: apiDocsEnabled(config),
    developmentPages: options.developmentPages,
    defaultLocale: config.DEFAULT_LOCALE ?? 'en',
    secureCookies: config.NODE_ENV === 'staging' || config.NODE_ENV === 'production',
    breachedPasswords: breached,
    webhooks: bindWebhooks(config, { confirmSubscription: options.confirmSubscription }),
    hooks: hookSettings(config, supabaseSigningKey, logger),
    // A purpose a live older worker cannot render is refused retryably, not queued for it to dead-letter.
    renderedPurpose,
  }
}

/** Listens with the app on PORT; the trace context is continued only from TRACE_TRUSTED_CALLERS. */
async function listen(app: Express, options: WebOptions): Promise<Server> {
  const { config, logger } = options
  const listening = createServer(app).on('connection', rememberPeerAddress).on('clientError', answerClientError(logger))
  traceContextOnlyFrom(listening, { trusted: config.TRACE_TRUSTED_CALLERS ?? [], trustProxy: config.TRUST_PROXY })
  return await new Promise<Server>((resolve, reject) => {
    listening.once('error', reject).listen(config.PORT, options.host ?? '0.0.0.0', () => {
      listening.off('error', reject)
      resolve(listening)
    })
  })
}

/** The web process: Express over the api role's pool; pg-boss only to enqueue inside our transactions. */
export async function startWeb(options: WebOptions): Promise<RunningWeb> {
  const { config, logger } = options
  const db = createKnex(options.apiUrl, { applicationName: 'sealpost-web', max: 20, logger })
  const boss = createBoss(options.apiUrl, 'web', logger)
  const breached = config.BREACHED_PASSWORD_API_URL
    ? createBreachedPasswordCheck({
        apiUrl: config.BREACHED_PASSWORD_API_URL,
        timeoutMs: config.BREACHED_PASSWORD_TIMEOUT_MS ?? 2_000,
        logger,
      })
    : undefined
  let server: Server | undefined
  let channels: ChannelDirectory | undefined
  let negotiation: EnvelopeNegotiation | undefined
  try {
    await waitForDatabase(db, { variable: 'API_DATABASE_URL', timeoutSeconds: config.DATABASE_WAIT_SECONDS ?? 60, logger })
    await assertConnectionRole(db, databaseRoles(config).api, 'API_DATABASE_URL')
    await boss.start()
    // Which channels exist is what the workers registered (docs/delivery.md "Channels"), known before the first request.
    channels = await loadChannelDirectory({ db, logger })
    const clock = options.clock ?? (() => new Date())
    // The newest envelope every connected worker opens (docs/upgrading.md "Format negotiation"), known before the first request.
    negotiation = await loadEnvelopeNegotiation({ db, setting: config.ENVELOPE_VERSION, logger })
    const parts = {
      db,
      boss,
      channels,
      envelopeVersion: negotiation.version,
      renderedPurpose: negotiation.renders,
      breached: breached?.check,
      clock,
    }
    server = await listen(createApp(webDeps(options, parts)), options)
  } catch (error) {
    channels?.stop()
    negotiation?.stop()
    await Promise.allSettled([boss.stop({ graceful: false }), db.destroy(), breached?.close()])
    throw error
  }
  const { address, family, port } = server.address() as AddressInfo
  const running = server
  const directory = channels
  const negotiated = negotiation
  return {
    url: `http://127.0.0.1:${port}`,
    bound: family === 'IPv6' ? `[${address}]:${port}` : `${address}:${port}`,
    server: running,
    channels: directory,
    formats: negotiated,
    async stop() {
      // Stop accepting, let in-flight requests finish (bounded), then release pg-boss and the pool.
      const closed = new Promise<void>((resolve) => running.close(() => resolve()))
      running.closeIdleConnections()
      const forced = setTimeout(() => running.closeAllConnections(), 10_000)
      await closed
      clearTimeout(forced)
      directory.stop()
      negotiated?.stop()
      await boss.stop({ graceful: true, timeout: 5_000 })
      await db.destroy()
      await breached?.close()
      logger.info('web stopped')
    },
  }
}
