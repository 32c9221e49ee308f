import { PgBoss } from 'pg-boss'
import { ConfigError, type Config } from '../../config/schema.ts'
import { createExpiryPurgeHandler } from '../../jobs/expiry-purge.ts'
import { createRetentionSweepHandler } from '../../jobs/retention-sweep.ts'
import { createDeadLetterQueueHandler } from '../../jobs/dead-letter-queue.ts'
import { createDeliveryHandler } from '../../jobs/deliver.ts'
import { WORKER_ROLE } from '../../migrations/20261130000100_roles.ts'
import { createBoss } from '../db/boss.ts'
import { assertConnectionRole } from '../db/connection-guard.ts'
import { createKnex } from '../db/knex.ts'
import type { Provider } from '../delivery/provider.ts'
import { loadTemplates } from '../delivery/templates.ts'
import type { Logger } from '../logging/logger.ts'
import { createWorkerMetrics, serveMetrics } from '../metrics/worker-metrics.ts'
import { CHANNELS, QUEUES, type Channel, type DeliveryJobData } from '../outbox/constants.ts'
import type { Keys } from './dev-keys.ts'

export type RunningWorker = { stop: () => Promise<void>; metricsUrl?: string }

type WorkerConfig = Pick<
  Config,
  | 'WORKER_CONCURRENCY'
  | 'SEND_TIMEOUT_MS'
  | 'MAX_ATTEMPTS'
  | 'RETRY_SCHEDULE'
  | 'LEASE_SECONDS'
  | 'CHALLENGE_TTL_SECONDS'
  | 'EXPIRY_PURGE_CRON'
  | 'RETENTION_SWEEP_CRON'
  | 'RETENTION_PUBLISHED_DAYS'
  | 'RETENTION_DEAD_LETTERED_DAYS'
  | 'INVITATION_LINK_BASE_URL'
  | 'NODE_ENV'
  | 'PORT'
  | 'WORKER_METRICS_PORT'
> & Partial<Pick<Config, 'PRODUCT_NAME' | 'SUPPORT_URL' | 'DEFAULT_LOCALE'>>

/**
 * Where invitation links point: INVITATION_LINK_BASE_URL, or in development the local web. In
 * staging and production there is no default: invitations then fail retryably (and say so at
 * startup) while one-time codes are delivered as usual.
 */
export function invitationLinkBase(config: Pick<Config, 'INVITATION_LINK_BASE_URL' | 'NODE_ENV' | 'PORT'>): string | undefined {
  if (config.INVITATION_LINK_BASE_URL) return config.INVITATION_LINK_BASE_URL.replace(/\/+$/, '')
  if (config.NODE_ENV === 'production' || config.NODE_ENV === 'staging') return undefined
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
  if (first === undefined || second === undefined || third === undefined) throw new ConfigError([{ variable, problem: 'never fires again' }])
  const interval = Math.min(second - first, third - second) / 1000
  if (interval < 60) throw new ConfigError([{ variable, problem: 'runs more than once a minute; pg-boss schedules run at most once a minute' }])
  return interval
}

/**
 * pg-boss fetch settings for one-time codes (README "Delivery settings"): LISTEN/NOTIFY wakes a
 * worker within milliseconds of a commit; two local fetch loops of half the concurrency each mean
 * a wake-up that lands while one loop is mid-fetch is taken by the other instead of waiting for
 * the poll; burst mode keeps fetching while batches come back full; the 2 s poll is the floor.
 */
export function deliveryWorkOptions(config: Pick<Config, 'WORKER_CONCURRENCY'>) {
  const loops = config.WORKER_CONCURRENCY >= 2 ? 2 : 1
  return {
    localConcurrency: loops,
    batchSize: Math.ceil(config.WORKER_CONCURRENCY / loops),
    burstWhenBatchFull: true,
    pollingIntervalSeconds: 2,
    notifyPollingIntervalSeconds: 2,
  }
}

/** The worker process: delivery and crash-loop handlers over the worker role's pool. */
export async function startWorker(options: {
  config: WorkerConfig
  workerUrl: string
  keys: Keys
  providers: Provider[]
  logger: Logger
  clock?: () => Date
}): Promise<RunningWorker> {
  const { config, logger } = options
  const clock = options.clock ?? (() => new Date())
  const db = createKnex(options.workerUrl, { applicationName: 'sealpost-worker', max: config.WORKER_CONCURRENCY + 4, logger })
  const cron = { purge: cronIntervalSeconds(config.EXPIRY_PURGE_CRON, 'EXPIRY_PURGE_CRON'), sweep: cronIntervalSeconds(config.RETENTION_SWEEP_CRON, 'RETENTION_SWEEP_CRON') }
  if (cron.purge > config.CHALLENGE_TTL_SECONDS) {
    logger.warn('EXPIRY_PURGE_CRON runs less often than challenges expire; expired messages wait longer for the purge (the per-claim expiry check still protects every send)', { purgeIntervalSeconds: cron.purge, challengeTtlSeconds: config.CHALLENGE_TTL_SECONDS })
  }
  const boss = createBoss(options.workerUrl, 'worker', logger, { leaseSeconds: config.LEASE_SECONDS, shortestCronSeconds: Math.min(cron.purge, cron.sweep) })
  const providers: Partial<Record<Channel, Provider>> = Object.fromEntries(options.providers.map((provider) => [provider.channel, provider]))
  const invitationLinkBaseUrl = invitationLinkBase(config)
  if (!invitationLinkBaseUrl) {
    logger.warn('INVITATION_LINK_BASE_URL is not set: invitation messages will fail as invitation_link_unconfigured (and retry) until it is; one-time codes are not affected')
  }
  for (const channel of CHANNELS) {
    if (!providers[channel]) logger.warn('no provider configured for a channel; its messages will fail as UNAVAILABLE until one is', { channel })
  }
  const metrics = createWorkerMetrics()
  let metricsServer: Awaited<ReturnType<typeof serveMetrics>> | undefined
  try {
    await assertConnectionRole(db, WORKER_ROLE, 'WORKER_DATABASE_URL')
    if (config.WORKER_METRICS_PORT !== undefined) metricsServer = await serveMetrics(metrics.registry, config.WORKER_METRICS_PORT)
    await boss.start()
    const handler = createDeliveryHandler({
      db,
      boss,
      outboxKey: options.keys.outboxKey,
      providers,
      clock,
      logger,
      settings: { maxAttempts: config.MAX_ATTEMPTS, retrySchedule: config.RETRY_SCHEDULE, sendTimeoutMs: config.SEND_TIMEOUT_MS },
      invitationLinkBaseUrl,
      metrics,
      templates: loadTemplates({ productName: config.PRODUCT_NAME ?? 'Sealpost', supportUrl: config.SUPPORT_URL, defaultLocale: config.DEFAULT_LOCALE ?? 'en' }),
    })
    await boss.work<DeliveryJobData>(QUEUES.delivery, deliveryWorkOptions(config), handler)
    await boss.work<DeliveryJobData>(QUEUES.deadLetter, { batchSize: 10 }, createDeadLetterQueueHandler({ db, boss, clock, logger }))
    // Registered by every worker; pg-boss sends each tick once for the whole fleet (UTC).
    await boss.schedule(QUEUES.expiryPurge, config.EXPIRY_PURGE_CRON, null, { tz: 'UTC' })
    await boss.schedule(QUEUES.retentionSweep, config.RETENTION_SWEEP_CRON, null, { tz: 'UTC' })
    await boss.work(QUEUES.expiryPurge, { pollingIntervalSeconds: 1 }, createExpiryPurgeHandler({ db, boss, clock, logger, metrics }))
    await boss.work(
      QUEUES.retentionSweep,
      { pollingIntervalSeconds: 5 },
      createRetentionSweepHandler({ db, clock, logger, metrics, publishedDays: config.RETENTION_PUBLISHED_DAYS, deadLetteredDays: config.RETENTION_DEAD_LETTERED_DAYS }),
    )
  } catch (error) {
    await Promise.allSettled([boss.stop({ graceful: false }), db.destroy(), metricsServer?.stop()])
    throw error
  }
  logger.info('worker started', { ...deliveryWorkOptions(config), ...(metricsServer ? { metricsUrl: metricsServer.url } : {}) })
  return {
    metricsUrl: metricsServer?.url,
    async stop() {
      await metricsServer?.stop()
      // Graceful: no new fetches, in-flight sends finish and record (bounded by the send timeout).
      await boss.stop({ graceful: true, timeout: config.SEND_TIMEOUT_MS + 5_000 })
      await db.destroy()
      logger.info('worker stopped')
    },
  }
}
