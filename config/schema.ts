import { z } from 'zod'

/** Raised when the environment cannot start a process; its message names variables, never values. */
export class ConfigError extends Error {
  override name = 'ConfigError'
  readonly variables: string[]
  constructor(problems: { variable: string; problem: string }[]) {
    super(
      'Invalid configuration:\n' + problems.map((p) => `  - ${p.variable}: ${p.problem}`).join('\n'),
    )
    this.variables = problems.map((p) => p.variable)
  }
}

const DURATION = /^(\d+)(ms|s|m|h)$/
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const

/** Parses `5s,30s,2m` into milliseconds; pure so the retry policy can be table-tested. */
export function parseSchedule(text: string): number[] {
  return text.split(',').map((part) => {
    const match = DURATION.exec(part.trim())
    if (!match) throw new Error('expected a comma-separated list like 5s,30s,2m,10m,30m')
    return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
  })
}

const base64Key = (minBytes: number, maxBytes: number) =>
  z
    .string()
    .transform((text, ctx) => {
      const bytes = Buffer.from(text, 'base64')
      if (bytes.length < minBytes || bytes.length > maxBytes || bytes.toString('base64') !== text) {
        ctx.addIssue({
          code: 'custom',
          message:
            minBytes === maxBytes
              ? `must be ${minBytes} random bytes, base64-encoded`
              : `must be at least ${minBytes} random bytes, base64-encoded`,
        })
        return z.NEVER
      }
      return bytes
    })

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback)
const url = z.url({ protocol: /^(postgres|postgresql|https?)$/ })

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'staging', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  DATABASE_URL: url.optional(),
  API_DATABASE_URL: url.optional(),
  WORKER_DATABASE_URL: url.optional(),
  OUTBOX_ENCRYPTION_KEY: base64Key(32, 32).optional(),
  CODE_HASH_KEY: base64Key(32, 64).optional(),
  SES_REGION: z.string().min(1).optional(),
  SES_FROM_ADDRESS: z.email().optional(),
  SES_ENDPOINT: url.optional(),
  WASENDER_API_URL: url.optional(),
  WASENDER_API_KEY: z.string().min(1).optional(),
  INVITATION_LINK_BASE_URL: url.optional(),
  CHALLENGE_TTL_SECONDS: positiveInt(600),
  INVITATION_TTL_SECONDS: positiveInt(7 * 24 * 3600),
  RETRY_SCHEDULE: z
    .string()
    .default('5s,30s,2m,10m,30m')
    .transform((text, ctx) => {
      try {
        return parseSchedule(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    }),
  MAX_ATTEMPTS: positiveInt(5),
  SEND_TIMEOUT_MS: positiveInt(10_000),
  LEASE_SECONDS: positiveInt(60),
  WORKER_CONCURRENCY: positiveInt(16),
  /** Where a worker serves its Prometheus metrics (GET /metrics); unset = not served. */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Requests per minute one client address may make to the public routes. */
  CLIENT_RATE_LIMIT_PER_MINUTE: positiveInt(60),
  EXPIRY_PURGE_CRON: z.string().min(1).default('* * * * *'),
  RETENTION_SWEEP_CRON: z.string().min(1).default('17 3 * * *'),
  RETENTION_PUBLISHED_DAYS: positiveInt(30),
  RETENTION_DEAD_LETTERED_DAYS: positiveInt(90),
  /** Development only: where the in-process SES emulator listens (0 = any free port). */
  SES_EMULATOR_PORT: z.coerce.number().int().min(0).max(65535).default(8005),
  /** Development only: where `.data/` (embedded PostgreSQL, generated keys) lives. */
  SEALPOST_DATA_DIR: z.string().min(1).default('.data'),
  /** SES configuration set named on every SendEmail (its event destination publishes to the SNS topic). */
  SES_CONFIGURATION_SET: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)').optional(),
  /** The SNS topic whose deliveries POST /webhooks/ses accepts; unset = the route refuses everything. */
  SES_EVENTS_TOPIC_ARN: z.string().regex(/^arn:aws:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN').optional(),
  /** Tests and local runs only: a PEM certificate that replaces the fetch of SNS signing certificates. */
  SNS_TEST_SIGNING_CERT: z.string().min(1).optional(),
  /** The webhook secret of the Wasender session; unset = POST /webhooks/wasender refuses everything. */
  WASENDER_WEBHOOK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /** The locale of messages whose request named none we ship. */
  DEFAULT_LOCALE: z.enum(['en', 'de', 'es']).default('en'),
  PRODUCT_NAME: z.string().trim().min(1).max(60).regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters').default('Sealpost'),
  /** The sender's display name in the From header (default: PRODUCT_NAME). */
  SES_FROM_NAME: z.string().trim().min(1).max(60).regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters').optional(),
  /** Shown as plain text in every message ("contact support"); unset = the sentence is left out. */
  SUPPORT_URL: z.url({ protocol: /^https?$/ }).optional(),
})

type Env = z.output<typeof envSchema>

/** The validated configuration; keys are Buffers so they never print by accident as text. */
export type Config = Omit<Env, 'OUTBOX_ENCRYPTION_KEY' | 'CODE_HASH_KEY'> & {
  OUTBOX_ENCRYPTION_KEY?: Buffer
  CODE_HASH_KEY?: Buffer
}

/** The process roles of the Procfile plus the CLI; each needs different settings in production. */
export type ProcessRole = 'release' | 'web' | 'worker' | 'cli' | 'all-in-one'

const REQUIRED_IN_PRODUCTION: Record<ProcessRole, (keyof Env)[]> = {
  release: ['DATABASE_URL'],
  cli: ['DATABASE_URL', 'OUTBOX_ENCRYPTION_KEY', 'CODE_HASH_KEY'],
  web: ['API_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEY', 'CODE_HASH_KEY'],
  worker: ['WORKER_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEY', 'CODE_HASH_KEY', 'SES_REGION', 'SES_FROM_ADDRESS', 'WASENDER_API_URL', 'WASENDER_API_KEY'],
  'all-in-one': [],
}

/**
 * Reads the environment once. Invalid values always stop the process; in staging and production a
 * missing setting the given process needs does too, since neither embedded fallback exists there.
 */
export function loadConfig(env: NodeJS.ProcessEnv, role: ProcessRole): Config {
  const blankless = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''))
  const parsed = envSchema.safeParse(blankless)
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => ({
        variable: String(issue.path[0] ?? 'environment'),
        problem: issue.message,
      })),
    )
  }
  const config = parsed.data
  const deployed = config.NODE_ENV === 'production' || config.NODE_ENV === 'staging'
  if (deployed) {
    if (role === 'all-in-one') {
      throw new ConfigError([{ variable: 'NODE_ENV', problem: '`npm start` is the development mode; run the Procfile processes in staging and production' }])
    }
    const missing = REQUIRED_IN_PRODUCTION[role].filter((name) => config[name] === undefined)
    if (missing.length > 0) {
      throw new ConfigError(missing.map((variable) => ({ variable, problem: `is required for the ${role} process in ${config.NODE_ENV}` })))
    }
  }
  if (deployed && config.SNS_TEST_SIGNING_CERT !== undefined) {
    throw new ConfigError([{ variable: 'SNS_TEST_SIGNING_CERT', problem: `is for tests and local runs only and is refused in ${config.NODE_ENV}` }])
  }
  const minLeaseSeconds = (2 * config.SEND_TIMEOUT_MS + 5000) / 1000
  if (config.LEASE_SECONDS < minLeaseSeconds) {
    throw new ConfigError([
      { variable: 'LEASE_SECONDS', problem: `must be at least 2 × SEND_TIMEOUT_MS + 5 s (${minLeaseSeconds} s) so a slow send never outlives its lease` },
    ])
  }
  if (config.RETRY_SCHEDULE.length < config.MAX_ATTEMPTS - 1) {
    throw new ConfigError([{ variable: 'RETRY_SCHEDULE', problem: 'needs at least MAX_ATTEMPTS - 1 entries' }])
  }
  return config
}
