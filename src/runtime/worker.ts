import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { resolveWithDns, type Resolve } from '../platform/webhook-address-guard.ts'
import { startWebhooks, type RunningWebhooks } from './events-out.ts'
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
import type { Logger } from '../logging/logger.ts'
import { metricsAccess } from '../metrics/access.ts'
import { createWorkerMetrics, serveMetrics, type WorkerMetrics } from '../metrics/worker-metrics.ts'
import { startChannelRegistration } from '../outbox/channel-registration.ts'
import { CHANNELS, QUEUES, type Channel, type DeliveryJobData } from '../outbox/constants.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from './delivery-pipeline.ts'
import { ensureProviderStates } from '../outbox/provider-states-sql.ts'
import { sendCapsFrom } from '../outbox/send-caps.ts'
import type { Keys } from './dev-keys.ts'
import { deliveryPipelineOptions, workerStartup, type WorkerConfig, type WorkerStartup } from './worker-settings.ts'

export type RunningWorker = { stop: () => Promise<void>; metricsUrl?: string }

/** What the worker process is started with. */
type WorkerOptions = {
  config: WorkerConfig
  workerUrl: string
  /** The worker opens envelopes only: no code-hash key (it never hashes or counts). */
  keys: Pick<Keys, 'outboxKey'>
  providers: Provider[]
  logger: Logger
  clock?: () => Date
  /** Tests: how webhook endpoint hosts resolve at send time (default: DNS). */
  resolve?: Resolve
}

/** The worker role's pool, once the database answers as that role, and the delivery queue's lease (the release step's). */
async function openDatabase(options: WorkerOptions): Promise<{ db: Knex; leaseSeconds: number }> {
  const { config, logger } = options
  const db = createKnex(options.workerUrl, {
    applicationName: readerApplicationName('sealpost-worker'),
    max: config.WORKER_CONCURRENCY + 4,
    logger,
  })
  try {
    await waitForDatabase(db, { variable: 'WORKER_DATABASE_URL', timeoutSeconds: config.DATABASE_WAIT_SECONDS ?? 60, logger })
    await assertConnectionRole(db, databaseRoles(config).worker, 'WORKER_DATABASE_URL')
    return { db, leaseSeconds: await checkQueueLease(db, config.SEND_TIMEOUT_MS) }
  } catch (error) {
    await db.destroy()
    throw error
  }
}

/** Each channel's providers in the order given (the failover order, EMAIL_PROVIDERS), and the channels that have one. */
function providersByChannel(options: WorkerOptions): { providers: Partial<Record<Channel, Provider[]>>; channels: Channel[] } {
  const providers: Partial<Record<Channel, Provider[]>> = {}
  for (const provider of options.providers) (providers[provider.channel] ??= []).push(provider)
  for (const channel of CHANNELS) {
    if (!providers[channel])
      options.logger.info('no provider configured for a channel; this worker does not offer it (docs/delivery.md "Channels")', { channel })
  }
  return { providers, channels: CHANNELS.filter((channel) => providers[channel]) }
}

type Opened = { db: Knex; boss: PgBoss; clock: () => Date; metrics: WorkerMetrics }

/** The crash-loop queue's handler and the two schedules (registered by every worker; pg-boss sends each tick once for the whole fleet, UTC). */
async function startSchedules({ db, boss, clock, metrics }: Opened, { config, logger }: WorkerOptions): Promise<void> {
  await boss.work<DeliveryJobData>(QUEUES.crashLoop, { batchSize: 10 }, createCrashLoopQueueHandler({ db, boss, clock, logger }))
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
}

/** The delivery pipeline over this worker's providers (docs/architecture.md §4), with the retry, pause and cap settings. */
function startDelivery(
  opened: Opened,
  options: WorkerOptions,
  providers: Partial<Record<Channel, Provider[]>>,
  startup: WorkerStartup,
): DeliveryPipeline {
  const { config } = options
  return startDeliveryPipeline(
    {
      ...opened,
      outboxKey: options.keys.outboxKey,
      providers,
      logger: options.logger,
      settings: {
        maxAttempts: config.MAX_ATTEMPTS,
        retrySchedule: config.RETRY_SCHEDULE,
        sendTimeoutMs: config.SEND_TIMEOUT_MS,
        providerPause: { maxPauseSeconds: config.MAX_PROVIDER_PAUSE_SECONDS, random: Math.random },
      },
      invitationLinkBaseUrl: startup.invitationLinkBaseUrl,
      templates: startup.templates,
      sendCaps: sendCapsFrom(config),
      ...(config.PHONE_CHANNELS ? { phoneChannels: config.PHONE_CHANNELS } : {}),
    },
    deliveryPipelineOptions(config),
  )
}

/** The worker process: delivery and crash-loop handlers over the worker role's pool. */
export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const { config, logger } = options
  const clock = options.clock ?? (() => new Date())
  // Checked before any connection opens.
  const startup = workerStartup(config, logger)
  const { db, leaseSeconds } = await openDatabase(options)
  const boss = createBoss(options.workerUrl, 'worker', logger, {
    leaseSeconds,
    shortestCronSeconds: Math.min(startup.cron.purge, startup.cron.sweep),
    // Every worker connection says which envelopes it opens: how webs know it is live and what to seal.
    applicationName: readerApplicationName('sealpost-worker-boss'),
  })
  const { providers, channels } = providersByChannel(options)
  const metrics = createWorkerMetrics()
  const opened: Opened = { db, boss, clock, metrics }
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
    pipeline = startDelivery(opened, options, providers, startup)
    webhooks = await startWebhooks({ db, boss, config, keys: options.keys, clock, logger, resolve: options.resolve ?? resolveWithDns })
    const running = { messages: pipeline, events: webhooks }
    listener = await listenForJobs(boss, {
      [QUEUES.delivery]: () => running.messages.wake(),
      [QUEUES.webhookDelivery]: () => running.events.wake(),
    })
    await startSchedules(opened, options)
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
