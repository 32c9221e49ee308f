import { randomUUID } from 'node:crypto'
import { PgBoss } from 'pg-boss'
import { resolveWithDns, type Resolve } from '../platform/webhook-address-guard.ts'
import { startWebhooks, type RunningWebhooks } from './events-out.ts'
import { ConfigError, type CoreConfig as Config } from '../../config/schema.ts'
import { createExpiryPurgeHandler } from '../../jobs/expiry-purge.ts'
import { createRetentionSweepHandler } from '../../jobs/retention-sweep.ts'
import { createCrashLoopQueueHandler } from '../../jobs/crash-loop-queue.ts'
import { createBoss, listenForJobs } from '../db/boss.ts'
import { assertConnectionRole } from '../db/connection-guard.ts'
import { checkQueueLease } from '../db/queue-lease.ts'
import { createKnex } from '../db/knex.ts'
import { readerApplicationName } from '../outbox/envelope-negotiation.ts'
import { waitForDatabase } from '../db/unavailable.ts'
import { databaseRoles } from '../db/roles.ts'
import type { Provider } from '../providers/provider.ts'
import { loadTemplates } from '../delivery/templates.ts'
import type { Logger } from '../logging/logger.ts'
import { metricsAccess } from '../metrics/access.ts'
import { createWorkerMetrics, serveMetrics } from '../metrics/worker-metrics.ts'
import { startChannelRegistration } from '../outbox/channel-registration.ts'
import { CHANNELS, QUEUES, type Channel, type DeliveryJobData } from '../outbox/constants.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from './delivery-pipeline.ts'
import { ensureProviderStates } from '../outbox/provider-states-sql.ts'
import { sendCapsFrom } from '../outbox/send-caps.ts'
import type { Keys } from './dev-keys.ts'

export type RunningWorker = { stop: () => Promise<void>; metricsUrl?: string }

type WorkerConfig = Pick<
  Config,
  | 'WORKER_CONCURRENCY'
  | 'SEND_TIMEOUT_MS'
  | 'MAX_ATTEMPTS'
  | 'MAX_PROVIDER_PAUSE_SECONDS'
  | 'RETRY_SCHEDULE'
  | 'CHALLENGE_TTL_SECONDS'
  | 'EXPIRY_PURGE_CRON'
  | 'RETENTION_SWEEP_CRON'
  | 'RETENTION_PUBLISHED_DAYS'
  | 'RETENTION_AUDIT_DAYS'
  | 'RETENTION_DEAD_LETTERED_DAYS'
  | 'RETENTION_EVENTS_DAYS'
  | 'WEBHOOK_ALLOWED_HOSTS'
  | 'WEBHOOK_RETRY_SCHEDULE'
  | 'WEBHOOK_MAX_ATTEMPTS'
  | 'INVITATION_LINK_BASE_URL'
  | 'NODE_ENV'
  | 'PORT'
  | 'WORKER_METRICS_PORT'
  | 'METRICS_TOKEN'
> &
  Partial<
    Pick<
      Config,
      | 'DATABASE_WAIT_SECONDS'
      | 'PHONE_CHANNELS'
      | 'SEALPOST_API_ROLE'
      | 'SEALPOST_WORKER_ROLE'
      | 'PRODUCT_NAME'
      | 'SUPPORT_URL'
      | 'DEFAULT_LOCALE'
      | 'OTP_ORIGIN_DOMAIN'
      | 'SEND_CAP_PER_HOUR'
      | 'PHONE_CAP_PER_COUNTRY_PER_HOUR'
      | 'SMS_HOURLY_CAP'
      | 'SMS_PREFIX_HOURLY_CAP'
      | 'COURIER_CAP_SHARE'
      | 'SMS_ALLOWED_COUNTRIES'
    >
  >

/**
 * Where invitation links point: INVITATION_LINK_BASE_URL, or in development the local web. In
 * staging and production there is no default and the worker does not start without it: a
 * configuration gap must never spend a message's attempts (a worker that refuses to start, naming the
 * variable, is seen at once; codes that fail five times and die quietly are not).
 */
export function invitationLinkBase(config: Pick<Config, 'INVITATION_LINK_BASE_URL' | 'NODE_ENV' | 'PORT'>): string {
  if (config.INVITATION_LINK_BASE_URL) return config.INVITATION_LINK_BASE_URL.replace(/\/+$/, '')
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging') {
    throw new ConfigError([
      {
        variable: 'INVITATION_LINK_BASE_URL',
        problem: `is required for the worker process in ${config.NODE_ENV}: invitation links point there`,
      },
    ])
  }
  return `http://localhost:${config.PORT}`
}

/**
 * Seconds between two ticks of a cron expression (UTC). A bad expression stops startup naming the
 * variable, and so does one more frequent than once a minute: pg-boss files at most one
 * occurrence per schedule per minute, so a faster cron would silently run less often than written.
 */
export function cronIntervalSeconds(cron: string, variable: string): number {
  let occurrences: Date[]
  try {
    occurrences = new PgBoss({ connectionString: 'postgres://unused' }).previewSchedule(cron, { count: 3, from: new Date(), tz: 'UTC' })
  } catch {
    throw new ConfigError([{ variable, problem: 'is not a valid cron expression' }])
  }
  const [first, second, third] = occurrences.map((date) => date.getTime())
  if (first === undefined || second === undefined || third === undefined)
    throw new ConfigError([{ variable, problem: 'never fires again' }])
  const interval = Math.min(second - first, third - second) / 1000
  if (interval < 60)
    throw new ConfigError([{ variable, problem: 'runs more than once a minute; pg-boss schedules run at most once a minute' }])
  return interval
}

/**
 * Delivery pacing (docs/delivery.md "Delivery settings"): up to WORKER_CONCURRENCY sends in flight, a fetch
 * once an eighth of the slots are free, outcomes recorded in group commits of whatever arrived
 * within 2 ms (two commits in flight at most), LISTEN/NOTIFY to wake within milliseconds of a
 * commit, a local timer for retries this worker scheduled, and a 2 s poll as the floor.
 */
export function deliveryPipelineOptions(config: Pick<Config, 'WORKER_CONCURRENCY'>) {
  return {
    concurrency: config.WORKER_CONCURRENCY,
    minFetch: Math.max(1, Math.floor(config.WORKER_CONCURRENCY / 8)),
    pollMs: 2_000,
    groupWindowMs: 2,
    maxGroup: 128,
    maxCommits: 2,
  }
}

/** The worker process: delivery and crash-loop handlers over the worker role's pool. */
export async function startWorker(options: {
  config: WorkerConfig
  workerUrl: string
  /** The worker opens envelopes only: no code-hash key (it never hashes or counts). */
  keys: Pick<Keys, 'outboxKey'>
  providers: Provider[]
  logger: Logger
  clock?: () => Date
  /** Tests: how webhook endpoint hosts resolve at send time (default: DNS). */
  resolve?: Resolve
}): Promise<RunningWorker> {
  const { config, logger } = options
  const clock = options.clock ?? (() => new Date())
  const invitationLinkBaseUrl = invitationLinkBase(config)
  // Loaded, and each rendered with sample values so a broken one fails here, before any connection opens.
  const templates = loadTemplates({
    productName: config.PRODUCT_NAME ?? 'Sealpost',
    supportUrl: config.SUPPORT_URL,
    defaultLocale: config.DEFAULT_LOCALE ?? 'en',
    otpOriginDomain: config.OTP_ORIGIN_DOMAIN,
  })
  const db = createKnex(options.workerUrl, {
    applicationName: readerApplicationName('sealpost-worker'),
    max: config.WORKER_CONCURRENCY + 4,
    logger,
  })
  const cron = {
    purge: cronIntervalSeconds(config.EXPIRY_PURGE_CRON, 'EXPIRY_PURGE_CRON'),
    sweep: cronIntervalSeconds(config.RETENTION_SWEEP_CRON, 'RETENTION_SWEEP_CRON'),
  }
  if (cron.purge > config.CHALLENGE_TTL_SECONDS) {
    logger.warn(
      'EXPIRY_PURGE_CRON runs less often than challenges expire; expired messages wait longer for the purge (the per-claim expiry check still protects every send)',
      { purgeIntervalSeconds: cron.purge, challengeTtlSeconds: config.CHALLENGE_TTL_SECONDS },
    )
  }
  let leaseSeconds: number
  try {
    await waitForDatabase(db, { variable: 'WORKER_DATABASE_URL', timeoutSeconds: config.DATABASE_WAIT_SECONDS ?? 60, logger })
    await assertConnectionRole(db, databaseRoles(config).worker, 'WORKER_DATABASE_URL')
    leaseSeconds = await checkQueueLease(db, config.SEND_TIMEOUT_MS)
  } catch (error) {
    await db.destroy()
    throw error
  }
  const boss = createBoss(options.workerUrl, 'worker', logger, {
    leaseSeconds,
    shortestCronSeconds: Math.min(cron.purge, cron.sweep),
    // Every worker connection says which envelopes it opens: how webs know it is live and what to seal.
    applicationName: readerApplicationName('sealpost-worker-boss'),
  })
  // Each channel's providers in the order given: the failover order (EMAIL_PROVIDERS).
  const providers: Partial<Record<Channel, Provider[]>> = {}
  for (const provider of options.providers) (providers[provider.channel] ??= []).push(provider)
  const channels = CHANNELS.filter((channel) => providers[channel])
  for (const channel of CHANNELS) {
    if (!providers[channel])
      logger.info('no provider configured for a channel; this worker does not offer it (docs/delivery.md "Channels")', { channel })
  }
  const metrics = createWorkerMetrics()
  let pipeline: DeliveryPipeline | undefined
  let listener: { close: () => Promise<void> } | undefined
  let metricsServer: Awaited<ReturnType<typeof serveMetrics>> | undefined
  let registration: { stop: () => void } | undefined
  let webhooks: RunningWebhooks | undefined
  try {
    if (config.WORKER_METRICS_PORT !== undefined)
      metricsServer = await serveMetrics(metrics.registry, config.WORKER_METRICS_PORT, metricsAccess(config))
    // The fleet's channels are what its workers register (the web reads them); before the first delivery.
    registration = await startChannelRegistration({
      db,
      registration: { workerId: randomUUID(), channels, providers: options.providers.map((provider) => provider.id) },
      clock,
      logger,
    })
    await boss.start()
    // Every provider this worker sends through is listed (up) in the backlog view and the gauge from now on.
    await ensureProviderStates(db, options.providers, clock())
    pipeline = startDeliveryPipeline(
      {
        db,
        boss,
        outboxKey: options.keys.outboxKey,
        providers,
        clock,
        logger,
        settings: {
          maxAttempts: config.MAX_ATTEMPTS,
          retrySchedule: config.RETRY_SCHEDULE,
          sendTimeoutMs: config.SEND_TIMEOUT_MS,
          providerPause: { maxPauseSeconds: config.MAX_PROVIDER_PAUSE_SECONDS, random: Math.random },
        },
        invitationLinkBaseUrl,
        metrics,
        templates,
        sendCaps: sendCapsFrom(config),
        ...(config.PHONE_CHANNELS ? { phoneChannels: config.PHONE_CHANNELS } : {}),
      },
      deliveryPipelineOptions(config),
    )
    webhooks = await startWebhooks({ db, boss, config, keys: options.keys, clock, logger, resolve: options.resolve ?? resolveWithDns })
    const running = { messages: pipeline, events: webhooks }
    listener = await listenForJobs(boss, {
      [QUEUES.delivery]: () => running.messages.wake(),
      [QUEUES.webhookDelivery]: () => running.events.wake(),
    })
    await boss.work<DeliveryJobData>(QUEUES.crashLoop, { batchSize: 10 }, createCrashLoopQueueHandler({ db, boss, clock, logger }))
    // Registered by every worker; pg-boss sends each tick once for the whole fleet (UTC).
    await boss.schedule(QUEUES.expiryPurge, config.EXPIRY_PURGE_CRON, null, { tz: 'UTC' })
    await boss.schedule(QUEUES.retentionSweep, config.RETENTION_SWEEP_CRON, null, { tz: 'UTC' })
    await boss.work(QUEUES.expiryPurge, { pollingIntervalSeconds: 1 }, createExpiryPurgeHandler({ db, boss, clock, logger, metrics }))
    await boss.work(
      QUEUES.retentionSweep,
      { pollingIntervalSeconds: 5 },
      createRetentionSweepHandler({
        db,
        clock,
        logger,
        metrics,
        publishedDays: config.RETENTION_PUBLISHED_DAYS,
        auditDays: config.RETENTION_AUDIT_DAYS,
        deadLetteredDays: config.RETENTION_DEAD_LETTERED_DAYS,
        eventDays: config.RETENTION_EVENTS_DAYS,
      }),
    )
  } catch (error) {
    registration?.stop()
    await Promise.allSettled([listener?.close(), pipeline?.stop(), webhooks?.stop()])
    await Promise.allSettled([boss.stop({ graceful: false }), db.destroy(), metricsServer?.stop()])
    throw error
  }
  logger.info('worker started', {
    ...deliveryPipelineOptions(config),
    leaseSeconds,
    ...(metricsServer ? { metricsUrl: metricsServer.url } : {}),
  })
  return {
    metricsUrl: metricsServer?.url,
    async stop() {
      registration?.stop()
      await metricsServer?.stop()
      // Graceful: no new fetches, in-flight sends finish and record (bounded by the send timeout),
      // then pg-boss's own handlers drain.
      await listener?.close()
      await pipeline?.stop()
      await webhooks?.stop()
      await boss.stop({ graceful: true, timeout: config.SEND_TIMEOUT_MS + 5_000 })
      await db.destroy()
      logger.info('worker stopped')
    },
  }
}
