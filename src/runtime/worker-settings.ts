import { PgBoss } from 'pg-boss'
import { ConfigError, type CoreConfig as Config } from '../../config/schema.ts'
import { loadTemplates, type Templates } from '../delivery/templates.ts'
import type { Logger } from '../logging/logger.ts'

/** What the worker reads of the configuration. */
export type WorkerConfig = Pick<
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

/** What a worker checks and prepares before it opens any connection: its templates, its link base and its schedules. */
export type WorkerStartup = { templates: Templates; invitationLinkBaseUrl: string; cron: { purge: number; sweep: number } }

/**
 * The checks of a worker's settings that need no database: the templates loaded and each rendered
 * with sample values (a broken one fails here), INVITATION_LINK_BASE_URL, and both crons; a purge
 * slower than a challenge's life is allowed, and said.
 */
export function workerStartup(config: WorkerConfig, logger: Logger): WorkerStartup {
  const invitationLinkBaseUrl = invitationLinkBase(config)
  const templates = loadTemplates({
    productName: config.PRODUCT_NAME ?? 'Sealpost',
    supportUrl: config.SUPPORT_URL,
    defaultLocale: config.DEFAULT_LOCALE ?? 'en',
    otpOriginDomain: config.OTP_ORIGIN_DOMAIN,
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
  return { templates, invitationLinkBaseUrl, cron }
}
