import { randomUUID } from 'node:crypto'
import { PgBoss, type Queue } from 'pg-boss'
import type { CoreConfig } from '../../config/schema.ts'
import { describeError, type Logger } from '../logging/logger.ts'
import { withLibpqSslModes } from './connection-url.ts'
import { isDatabaseUnavailable } from './unavailable.ts'
import { QUEUES } from './queues.ts'

/** pg-boss's own retries count worker crashes only; past this a job lands in the crash-loop queue. */
export const CRASH_RETRY_LIMIT = 3

/**
 * The delivery queue. `expireInSeconds` is the lease: a job whose worker died is handed to another
 * after it. `notify` wakes workers by LISTEN/NOTIFY instead of waiting for a poll. Completed jobs
 * are kept 7 days for operators, then deleted by pg-boss's own maintenance.
 */
export function deliveryQueueOptions(config: Pick<CoreConfig, 'LEASE_SECONDS'>) {
  return {
    expireInSeconds: config.LEASE_SECONDS,
    retryLimit: CRASH_RETRY_LIMIT,
    // A crashed worker's job comes back 1 s, 2 s, 4 s after its lease expired: OTPs are short-lived.
    retryDelay: 1,
    retryBackoff: true,
    deadLetter: QUEUES.crashLoop,
    notify: true,
    deleteAfterSeconds: 7 * 24 * 3600,
    retentionSeconds: 14 * 24 * 3600,
  }
}

/**
 * The events-out delivery queue (docs/events.md "Delivery"): the same lease, crash retries and
 * crash-loop queue as message delivery. Its jobs carry the endpoint as their pg-boss group, so a
 * worker's fetch caps how many of one endpoint's deliveries are in flight across the fleet.
 */
export function webhookDeliveryQueueOptions(config: Pick<CoreConfig, 'LEASE_SECONDS'>) {
  return { ...deliveryQueueOptions(config), deadLetter: QUEUES.webhookCrashLoop }
}

/**
 * pg-boss's own INSERT of one job into `queue`, and its JSON parameter, exactly as `boss.send`
 * would run them: captured instead of sent (no I/O beyond pg-boss's cached queue settings). The
 * release builds `outbox.insert_delivery_job` from the statement; the web passes the JSON to it.
 */
export async function captureJobInsert(boss: PgBoss, queue: string, data: object, id: string): Promise<{ sql: string; json: string }> {
  let captured: { sql: string; json: string } | undefined
  const capture = {
    executeSql: async (text: string, values?: unknown[]) => {
      captured = { sql: text, json: String(values?.[0]) }
      return { rows: [{ id }] }
    },
  }
  await boss.send(queue, data, { db: capture, id })
  if (!captured || (JSON.parse(captured.json) as unknown[]).length !== 1) throw new Error('pg-boss did not hand over one job insert')
  return captured
}

/**
 * The notification pg-boss's captured insert (`captureJobInsert`) sends for an immediately
 * runnable job of `queue`, cut from the statement itself: `call` is its `pg_notify(<channel>,
 * '<queue>')`, `channel` the expression that names the channel. The release sends `call` where a
 * job was rehearsed; the worker LISTENs on `channel`. Taken from pg-boss's own statement, so both
 * follow whatever an upgrade of pg-boss writes.
 */
export function notificationOf(insertSql: string, queue: string): { call: string; channel: string } {
  const start = insertSql.indexOf('pg_notify(')
  const end = insertSql.indexOf(`, '${queue}')`, start)
  if (start < 0 || end < 0) throw new Error(`pg-boss’s job insert sends no notification for ${queue} (is its queue notify-enabled?)`)
  return { call: `${insertSql.slice(start, end)}, '${queue}')`, channel: insertSql.slice(start + 'pg_notify('.length, end) }
}

/**
 * Wakes each queue's fetch loop when pg-boss's own job insert notifies for it (its channel, cut from
 * the statement by `notificationOf`, carries the queue's name): a commit anywhere in the fleet
 * wakes this worker. A reconnect wakes every loop once for what it missed.
 */
export async function listenForJobs(
  boss: PgBoss,
  wakes: Readonly<Record<string, () => void>>,
): Promise<{ close: () => Promise<void> } | undefined> {
  const queue = Object.keys(wakes)[0]!
  const { sql } = await captureJobInsert(boss, queue, {}, randomUUID())
  const { rows } = await boss.getDb().executeSql(`SELECT ${notificationOf(sql, queue).channel} AS channel`)
  return await boss.getDb().listen?.(
    String(rows[0].channel),
    (payload) => wakes[payload]?.(),
    () => Object.values(wakes).forEach((wake) => wake()),
  )
}

type BossRole = 'release' | 'web' | 'worker'

/**
 * One pg-boss instance per process. Only `release` migrates pg-boss's schema; only the worker
 * runs maintenance, cron and LISTEN; the web uses pg-boss for transactional `send` alone.
 */
export function createBoss(
  connectionString: string,
  role: BossRole,
  logger: Logger,
  timing: { leaseSeconds?: number; shortestCronSeconds?: number; applicationName?: string } = {},
): PgBoss {
  // Expired claims are found by the supervisor's pass: it must run often relative to the lease,
  // or a crashed worker's message waits a minute more than it needs to.
  const superviseSeconds = Math.min(10, Math.max(1, Math.round((timing.leaseSeconds ?? 60) / 6)))
  // The cron pass must look at least once per tick of the most frequent schedule.
  const cronSeconds = Math.max(1, Math.min(30, Math.floor(timing.shortestCronSeconds ?? 60)))
  const boss = new PgBoss({
    connectionString: withLibpqSslModes(connectionString),
    application_name: timing.applicationName ?? `sealpost-${role}-boss`,
    max: role === 'worker' ? 10 : 4,
    migrate: role === 'release',
    supervise: role === 'worker',
    schedule: role === 'worker',
    useListenNotify: role === 'worker',
    // Only workers appear in pgboss.instance: a web process is a producer, not a member of the fleet.
    registerInstance: role === 'worker',
    superviseIntervalSeconds: superviseSeconds,
    monitorIntervalSeconds: superviseSeconds,
    cronMonitorIntervalSeconds: cronSeconds,
    cronWorkerIntervalSeconds: Math.min(5, cronSeconds),
  })
  // During a database restart pg-boss reports every failed poll here and carries on by itself:
  // a warning then, not an error (its loops resume when the database is back).
  boss.on('error', (error) =>
    isDatabaseUnavailable(error)
      ? logger.warn('pg-boss: database unavailable', { role, ...describeError(error) })
      : logger.error('pg-boss error', { role, ...describeError(error) }),
  )
  // pg-boss's own text (slow queries, a lost LISTEN, start retries); its data may name queues but
  // carries no job data; error text inside it is dropped, as everywhere (name and code only).
  // Its `data` (slow-query SQL and values among it) is never logged.
  boss.on('warning', (warning: { message?: unknown; data?: unknown }) => {
    const data = (warning.data && typeof warning.data === 'object' ? warning.data : {}) as Record<string, unknown>
    let text = typeof warning.message === 'string' ? warning.message : ''
    if (typeof data.error === 'string' && data.error) text = text.replaceAll(data.error, '[error text omitted]')
    logger.warn('pg-boss warning', {
      role,
      warning: text.slice(0, 300),
      warningType: typeof data.type === 'string' ? data.type : undefined,
    })
  })
  return boss
}

/** Installs or upgrades pg-boss's schema and (re)applies our queue settings. */
export async function installQueues(boss: PgBoss, config: Pick<CoreConfig, 'LEASE_SECONDS'>): Promise<void> {
  // Schedule ticks are never retried by pg-boss: the next tick is the retry (jobs/tick.ts).
  const maintenance = { retryLimit: 0, expireInSeconds: 15 * 60, deleteAfterSeconds: 7 * 24 * 3600 }
  const crashLoop = { retryLimit: CRASH_RETRY_LIMIT, expireInSeconds: config.LEASE_SECONDS, deleteAfterSeconds: 30 * 24 * 3600 }
  const queues: [string, Omit<Queue, 'name'>][] = [
    [QUEUES.crashLoop, crashLoop],
    [QUEUES.delivery, deliveryQueueOptions(config)],
    [QUEUES.expiryPurge, maintenance],
    [QUEUES.retentionSweep, maintenance],
    [QUEUES.webhookCrashLoop, crashLoop],
    [QUEUES.webhookDelivery, webhookDeliveryQueueOptions(config)],
    // A fan-out finds every event not fanned out yet: one waiting job covers any number of wake-ups.
    [QUEUES.webhookFanOut, { policy: 'stately', retryLimit: 0, expireInSeconds: 5 * 60, notify: true, deleteAfterSeconds: 3600 }],
  ]
  for (const [name, options] of queues) {
    // A queue's policy is fixed when it is created (pg-boss refuses to change it).
    const { policy, ...updatable } = options
    if (await boss.getQueue(name)) await boss.updateQueue(name, updatable)
    else await boss.createQueue(name, policy ? { ...updatable, policy } : updatable)
  }
}
