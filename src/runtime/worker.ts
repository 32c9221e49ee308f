import type { Config } from '../../config/schema.ts'
import { createDeadLetterQueueHandler } from '../../jobs/dead-letter-queue.ts'
import { createDeliveryHandler } from '../../jobs/deliver.ts'
import { WORKER_ROLE } from '../../migrations/20261130000100_roles.ts'
import { createBoss } from '../db/boss.ts'
import { assertConnectionRole } from '../db/connection-guard.ts'
import { createKnex } from '../db/knex.ts'
import type { Provider } from '../delivery/provider.ts'
import type { Logger } from '../logging/logger.ts'
import { CHANNELS, QUEUES, type Channel, type DeliveryJobData } from '../outbox/constants.ts'
import type { Keys } from './dev-keys.ts'

export type RunningWorker = { stop: () => Promise<void> }

type WorkerConfig = Pick<Config, 'WORKER_CONCURRENCY' | 'SEND_TIMEOUT_MS' | 'MAX_ATTEMPTS' | 'RETRY_SCHEDULE' | 'LEASE_SECONDS'>

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
  const boss = createBoss(options.workerUrl, 'worker', logger, config.LEASE_SECONDS)
  const providers: Partial<Record<Channel, Provider>> = Object.fromEntries(options.providers.map((provider) => [provider.channel, provider]))
  for (const channel of CHANNELS) {
    if (!providers[channel]) logger.warn('no provider configured for a channel; its messages will fail as UNAVAILABLE until one is', { channel })
  }
  try {
    await assertConnectionRole(db, WORKER_ROLE, 'WORKER_DATABASE_URL')
    await boss.start()
    const handler = createDeliveryHandler({
      db,
      boss,
      outboxKey: options.keys.outboxKey,
      providers,
      clock,
      logger,
      settings: { maxAttempts: config.MAX_ATTEMPTS, retrySchedule: config.RETRY_SCHEDULE, sendTimeoutMs: config.SEND_TIMEOUT_MS },
    })
    await boss.work<DeliveryJobData>(QUEUES.delivery, deliveryWorkOptions(config), handler)
    await boss.work<DeliveryJobData>(QUEUES.deadLetter, { batchSize: 10 }, createDeadLetterQueueHandler({ db, boss, clock, logger }))
  } catch (error) {
    await Promise.allSettled([boss.stop({ graceful: false }), db.destroy()])
    throw error
  }
  logger.info('worker started', deliveryWorkOptions(config))
  return {
    async stop() {
      // Graceful: no new fetches, in-flight sends finish and record (bounded by the send timeout).
      await boss.stop({ graceful: true, timeout: config.SEND_TIMEOUT_MS + 5_000 })
      await db.destroy()
      logger.info('worker stopped')
    },
  }
}
