import { isIP } from 'node:net'
import { z } from 'zod'
import { parseKeyRing, singleKeyRing, type KeyRing } from '../src/crypto/key-ring.ts'
import { parseLinkOrigins } from './link-origins.ts'
import { parseChannelCaps, parseCountryCaps, SMS_HOURLY_CAP_RETIRED } from './send-caps.ts'
import { ConfigError, isLoopback, positiveInt, url, type ProcessRole } from './fields.ts'

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
  z.string().transform((text, ctx) => {
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

/** Express `trust proxy` presets proxy-addr understands besides addresses and CIDR ranges. */
const PROXY_PRESETS = new Set(['loopback', 'linklocal', 'uniquelocal'])

function isAddressOrRange(entry: string): boolean {
  const [address, bits, ...rest] = entry.split('/')
  if (rest.length > 0 || !address) return false
  const family = isIP(address)
  if (family === 0) return false
  if (bits === undefined) return true
  if (!/^\d{1,3}$/.test(bits)) return false
  return Number(bits) <= (family === 4 ? 32 : 128)
}

/**
 * TRUST_PROXY → Express `trust proxy`: `false` (default: the socket's address is the client),
 * `true` (trust every hop: only behind a router that strips the header), a hop count (`1` on
 * Heroku), or a comma-separated list of proxy addresses, CIDR ranges and proxy-addr presets.
 */
export function parseTrustProxy(text: string): boolean | number | string[] {
  const value = text.trim().toLowerCase()
  if (value === 'false' || value === '0') return false
  if (value === 'true') return true
  if (/^\d+$/.test(value)) return Number(value)
  const entries = value.split(',').map((entry) => entry.trim())
  if (entries.every((entry) => PROXY_PRESETS.has(entry) || isAddressOrRange(entry))) return entries
  throw new Error('must be false, true, a hop count (1 on Heroku) or a comma-separated list of proxy addresses or CIDR ranges')
}
/** TRACE_TRUSTED_CALLERS: client addresses, CIDR ranges and proxy-addr presets; empty = none. */
export function parseTrustedCallers(text: string): string[] {
  if (text.trim() === '') return []
  const entries = text.split(',').map((entry) => entry.trim().toLowerCase())
  if (entries.every((entry) => PROXY_PRESETS.has(entry) || isAddressOrRange(entry))) return entries
  throw new Error('expected a comma-separated list of client addresses or CIDR ranges like 10.0.0.0/8')
}

const keyRing = (bytes: { min: number; max: number }) =>
  z.string().transform((text, ctx) => {
    try {
      return parseKeyRing(text, bytes)
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message })
      return z.NEVER
    }
  })

/** An existing PostgreSQL role, written so it needs no quoting anywhere in SQL. */
const roleName = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be an existing role name: lower-case letters, digits and _')

/** A `name:count,…` list through its parser, a parse error becoming the variable's problem. */
const countList = <T>(parse: (text: string) => T) =>
  z
    .string()
    .default('')
    .transform((text, ctx) => {
      try {
        return parse(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    })

/**
 * A variable no longer read, kept in the schema so that setting it stops every process at startup,
 * naming what to set instead: ignored, a cap or limit the operator believes in would silently not
 * hold.
 */
const retired = (instead: string) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value !== undefined) ctx.addIssue({ code: 'custom', message: instead })
      return undefined
    })

/** The phone channels PHONE_CHANNELS may list, in the order a message falls back across them. */
export const PHONE_CHANNEL_IDS = Object.freeze(['whatsapp', 'sms'] as const)
export type PhoneChannelId = (typeof PHONE_CHANNEL_IDS)[number]

/** Parses `whatsapp,sms` into the phone channels' fallback order; pure so it can be table-tested. */
export function parsePhoneChannels(text: string): PhoneChannelId[] {
  const ids = text.split(',').map((part) => part.trim())
  const known = (id: string): id is PhoneChannelId => (PHONE_CHANNEL_IDS as readonly string[]).includes(id)
  if (ids.length === 0 || !ids.every(known) || new Set(ids).size !== ids.length)
    throw new Error(`must be an ordered comma-separated list of ${PHONE_CHANNEL_IDS.join(', ')}, each at most once`)
  return ids
}

/** A hook's per-address budget an hour when HOOK_DESTINATION_HOURLY_BUDGET is unset (docs/hooks.md "Budgets"). */
export const DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET = 600

/** The fewest random bytes a signing secret may carry: the Standard Webhooks specification's lower bound (24, up to 64). */
const MIN_SIGNING_SECRET_BYTES = 24

/** A Standard Webhooks signing secret as Supabase shows it: `v1,whsec_<base64>` (src/hooks/standard-webhooks.ts). */
export const SIGNING_SECRET_FORM = /^v1,whsec_(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** A retry schedule setting (`5s,30s,2m`): parsed, a bad one refused with the parser's reason. */
const schedule = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      try {
        return parseSchedule(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    })

/**
 * The settings that are no provider's (each provider's are its folder's `settings.ts`, composed
 * with these by src/providers/config.ts): the processes, the database, keys, limits, schedules.
 */
export const coreSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'staging', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  DATABASE_URL: url.optional(),
  API_DATABASE_URL: url.optional(),
  WORKER_DATABASE_URL: url.optional(),
  OUTBOX_ENCRYPTION_KEY: base64Key(32, 32).optional(),
  /** `id:base64key,…`: the first key seals, every key opens (docs/operations.md "Rotating keys"). */
  OUTBOX_ENCRYPTION_KEYS: keyRing({ min: 32, max: 32 }).optional(),
  CODE_HASH_KEY: base64Key(32, 64).optional(),
  /** Which envelope version the web seals: `auto` = the newest every live worker opens (docs/upgrading.md). */
  ENVELOPE_VERSION: z.enum(['auto', 'v1', 'v2']).default('auto'),
  /** `id:base64key,…`: the first key hashes, every key verifies codes and counts budgets. */
  CODE_HASH_KEYS: keyRing({ min: 32, max: 64 }).optional(),
  /** Existing roles the release step grants to instead of creating sealpost_api / sealpost_worker. */
  SEALPOST_API_ROLE: roleName.optional(),
  SEALPOST_WORKER_ROLE: roleName.optional(),
  /** The web's public https origin, as the internet reaches it (a provider's status callbacks are built from it and signed over it). */
  PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** The phone channels allowed, in fallback order, `whatsapp,sms`; unset = both, WhatsApp first (docs/delivery.md "Phone channels"). */
  PHONE_CHANNELS: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return undefined
      try {
        return parsePhoneChannels(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    }),
  INVITATION_LINK_BASE_URL: url.optional(),
  CHALLENGE_TTL_SECONDS: positiveInt(600),
  INVITATION_TTL_SECONDS: positiveInt(7 * 24 * 3600),
  RETRY_SCHEDULE: schedule('5s,30s,2m,10m,30m'),
  MAX_ATTEMPTS: positiveInt(5),
  /** The longest any one provider answer may pause a channel for the fleet (a Retry-After beyond it is cut). */
  MAX_PROVIDER_PAUSE_SECONDS: positiveInt(300),
  SEND_TIMEOUT_MS: positiveInt(10_000),
  LEASE_SECONDS: positiveInt(60),
  WORKER_CONCURRENCY: positiveInt(16),
  /** Fleet-wide sends per channel per clock hour, `email:20000,whatsapp:2000`; unset = no cap (docs/delivery.md "Send caps"). */
  SEND_CAP_PER_HOUR: countList(parseChannelCaps),
  /** Fleet-wide phone sends per country calling code per clock hour, `44:500,*:200`; unset = no cap. */
  PHONE_CAP_PER_COUNTRY_PER_HOUR: countList(parseCountryCaps),
  /** Retired before any release read it: the `sms` channel's cap is SEND_CAP_PER_HOUR's `sms:` entry; set, every process refuses to start. */
  SMS_HOURLY_CAP: retired(SMS_HOURLY_CAP_RETIRED),
  /** Fleet-wide SMS sends per number prefix (first 7 E.164 digits) per clock hour; unset = no cap (docs/delivery.md "SMS pumping"). */
  SMS_PREFIX_HOURLY_CAP: z.coerce.number().int().min(0).optional(),
  /** The percent of each send cap courier and hook sends have to themselves; unset = they count with strangers' (docs/security.md). */
  COURIER_CAP_SHARE: z.coerce.number().int().min(1).max(99).optional(),
  /** ISO 3166 alpha-2 countries SMS may carry codes to, `GB,IE,DE`; unset = every country. */
  SMS_ALLOWED_COUNTRIES: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined || text.trim() === '') return undefined
      const countries = text.split(',').map((part) => part.trim().toUpperCase())
      if (countries.some((country) => !/^[A-Z]{2}$/.test(country))) {
        ctx.addIssue({ code: 'custom', message: 'expected a comma-separated list of ISO 3166 alpha-2 country codes like GB,IE,DE' })
        return z.NEVER
      }
      return countries
    }),
  /** Whether codes may go to fixed-line numbers (text-to-speech or SMS-to-landline gateways); default: only mobiles. */
  PHONE_ALLOW_FIXED_LINE: z.enum(['true', 'false']).default('false'),
  /** Whether codes may go to VoIP numbers; default: only mobiles. */
  PHONE_ALLOW_VOIP: z.enum(['true', 'false']).default('false'),
  /** Where a worker serves its Prometheus metrics (GET /metrics); unset = not served. */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Bearer token a scraper presents to GET /metrics (web and worker); without it metrics are served only in development and test. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').max(512).regex(/^\S+$/, 'must not contain spaces').optional(),
  /** How long web and worker wait at startup for an unreachable database before giving up. */
  DATABASE_WAIT_SECONDS: z.coerce.number().int().min(0).default(60),
  /** Which hops in front of the web may say who the client is (X-Forwarded-For); see parseTrustProxy. */
  TRUST_PROXY: z
    .string()
    .default('false')
    .transform((text, ctx) => {
      try {
        return parseTrustProxy(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    }),
  /** The clients whose inbound W3C trace context the web continues; unset = none (docs/operations.md "Tracing"). */
  TRACE_TRUSTED_CALLERS: countList(parseTrustedCallers),
  /** Requests per minute one client address may make to the public routes. */
  CLIENT_RATE_LIMIT_PER_MINUTE: positiveInt(60),
  EXPIRY_PURGE_CRON: z.string().min(1).default('* * * * *'),
  RETENTION_SWEEP_CRON: z.string().min(1).default('17 3 * * *'),
  RETENTION_PUBLISHED_DAYS: positiveInt(30),
  RETENTION_DEAD_LETTERED_DAYS: positiveInt(90),
  /** Days an audit record is kept before the retention sweep deletes it (at least 7: the database keeps a week whatever the worker asks). */
  RETENTION_AUDIT_DAYS: z.coerce.number().int().min(7).default(400),
  /** Days an event and its webhook deliveries are kept before the retention sweep deletes them. */
  RETENTION_EVENTS_DAYS: positiveInt(30),
  /**
   * Hosts webhook endpoints may name although they are an IP literal or resolve to a loopback,
   * private or link-local address (an internal receiver, a test), comma-separated; outside
   * production these may also be reached over plain http (docs/events.md "Endpoint URLs").
   */
  WEBHOOK_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((text) =>
      text
        .split(',')
        .map((host) =>
          host
            .trim()
            .toLowerCase()
            .replace(/^\[|\]$/g, ''),
        )
        .filter((host) => host !== ''),
    ),
  /** The wait after each failed webhook attempt (429, 5xx, timeout), before a receiver's Retry-After is considered. */
  WEBHOOK_RETRY_SCHEDULE: schedule('5s,1m,5m,30m,2h,8h'),
  /** Attempts per webhook delivery before it is dead-lettered (staff can redrive it). */
  WEBHOOK_MAX_ATTEMPTS: positiveInt(7),
  /** `GET /docs` (the rendered API reference): on in development and test, off in staging and production unless `on`. */
  API_DOCS: z.enum(['on', 'off']).optional(),
  /** Development only: where `.data/` (embedded PostgreSQL, generated keys) lives. */
  SEALPOST_DATA_DIR: z.string().min(1).default('.data'),
  /** Supabase Auth's Send Email/SMS hook secret, as its dashboard shows it; unset = POST /hooks/supabase/* answer 404. */
  SUPABASE_HOOK_SECRET: z
    .string()
    .regex(SIGNING_SECRET_FORM, 'must be `v1,whsec_<base64>`, as the Supabase dashboard shows it')
    .refine(
      (text) => Buffer.from(text.slice('v1,whsec_'.length), 'base64').length >= MIN_SIGNING_SECRET_BYTES,
      `must carry at least ${MIN_SIGNING_SECRET_BYTES} random bytes (a Standard Webhooks secret is 24 to 64): generate it in the Supabase dashboard`,
    )
    .optional(),
  /** The https origins a link through the Supabase hooks may point at (its project's auth URL); unset = its links are refused. */
  SUPABASE_LINK_ORIGINS: countList(parseLinkOrigins),
  /** The https origins a link through the Kratos courier may point at (Kratos' public URL); unset = its links are refused. */
  KRATOS_LINK_ORIGINS: countList(parseLinkOrigins),
  /** Messages a hook may send to one exact address an hour (ten times as many a day): a backstop far above the upstreams' own limits. */
  HOOK_DESTINATION_HOURLY_BUDGET: positiveInt(DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET),
  /** Supabase Auth's MAILER_URLPATHS_* value (a path, or a whole URL), resolved against the hook's site_url as Supabase resolves it. */
  SUPABASE_VERIFY_PATH: z
    .string()
    .max(512)
    // A whole URL must be https: every link built on an http one would be refused, message by message.
    .regex(/^(?:\/(?!\/)|https:\/\/)[^\s?#]*$/, 'must be a path such as `/auth/v1/verify`, or an https URL, without query or fragment')
    .refine((value) => URL.canParse(value, 'https://supabase.invalid'), 'must be a path such as `/auth/v1/verify`, or an https URL')
    .optional(),
  /** What a Supabase action that offers both sends: its code and its link, the link only, or the code only. */
  SUPABASE_EMAIL_CONTENT: z.enum(['both', 'link', 'code']).default('both'),
  /** How long a Supabase email code or link lives here: the project's Email OTP Expiration (MAILER_OTP_EXP). */
  SUPABASE_EMAIL_OTP_EXPIRY_SECONDS: z.coerce.number().int().min(10).max(86_400).default(3_600),
  /** How long a Supabase SMS code lives here: the project's SMS OTP Expiry (SMS_OTP_EXP). */
  SUPABASE_SMS_OTP_EXPIRY_SECONDS: z.coerce.number().int().min(10).max(86_400).default(60),
  /** The key Ory Kratos' HTTP courier presents (Bearer or basic-auth password); unset = POST /hooks/kratos/courier answers 404. */
  KRATOS_COURIER_API_KEY: z
    .string()
    .min(32, 'must be at least 32 characters')
    .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
    .optional(),
  /** The locale of messages whose request named none we ship. */
  DEFAULT_LOCALE: z.enum(['en', 'de', 'es']).default('en'),
  PRODUCT_NAME: z
    .string()
    .trim()
    .min(1)
    .max(60)
    .regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters')
    .default('Sealpost'),
  /** Shown as plain text in every message ("contact support"); unset = the sentence is left out. */
  SUPPORT_URL: z.url({ protocol: /^https?$/ }).optional(),
  /**
   * The host an SMS code's last line names (`@host #123456`, the origin-bound one-time code format)
   * so browsers and phones offer the code only on that site: the host of the page where people type
   * codes, lower case, no scheme, port or path; unset = no such line.
   */
  OTP_ORIGIN_DOMAIN: z
    .string()
    .max(253)
    .regex(
      /^(?=.*[a-z-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/,
      'must be a lower-case host name such as app.example.com (no scheme, port or path)',
    )
    .optional(),
  /** Pwned Passwords range API (https://api.pwnedpasswords.com) new passwords are checked against; unset = no check. */
  BREACHED_PASSWORD_API_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Bound on one breached-password lookup; past it the password is accepted unchecked (fail-open). */
  BREACHED_PASSWORD_TIMEOUT_MS: positiveInt(2_000),
  /** OpenTelemetry's own variables (docs/operations.md "Tracing"): an OTLP/HTTP endpoint turns tracing on in web and worker. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(100).optional(),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
})

type CoreEnv = z.output<typeof coreSchema>

/** The key rings as the processes use them: a single `…_KEY` is read as a one-entry ring. */
type Rings = { OUTBOX_ENCRYPTION_KEY?: Buffer; CODE_HASH_KEY?: Buffer; OUTBOX_ENCRYPTION_KEYS?: KeyRing; CODE_HASH_KEYS?: KeyRing }

/** The validated core configuration; keys are Buffers so they never print by accident as text. */
export type CoreConfig = Omit<CoreEnv, keyof Rings> & Rings

export { ConfigError, type ProcessRole } from './fields.ts'

/** Whether the web serves `GET /docs`: `API_DOCS` when set, else only outside staging and production. */
export function apiDocsEnabled(config: { NODE_ENV?: CoreConfig['NODE_ENV']; API_DOCS?: CoreConfig['API_DOCS'] }): boolean {
  if (config.API_DOCS !== undefined) return config.API_DOCS === 'on'
  return config.NODE_ENV !== 'staging' && config.NODE_ENV !== 'production'
}

/**
 * The shortest queue lease under which a send bounded by `sendTimeoutMs` can never outlive its job:
 * a ready message waits at most one round of sends, then sends itself, plus a commit's margin. The
 * release step's LEASE_SECONDS and the worker's check of the queue's lease both ask this.
 */
export function minimumLeaseSeconds(sendTimeoutMs: number): number {
  return (2 * sendTimeoutMs + 5_000) / 1000
}

// The worker never hashes a code or counts a budget, so it holds no CODE_HASH_KEYS (least privilege: docs/architecture.md §6).
/** The core settings each process needs in staging and production (a provider adds its own: src/providers/definition.ts). */
export const REQUIRED_IN_PRODUCTION: Record<ProcessRole, (keyof CoreConfig)[]> = {
  release: ['DATABASE_URL'],
  cli: ['DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'CODE_HASH_KEYS'],
  web: ['API_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'CODE_HASH_KEYS'],
  worker: ['WORKER_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'INVITATION_LINK_BASE_URL'],
  'all-in-one': [],
}

const SINGLE_KEY_OF: Partial<Record<string, string>> = {
  OUTBOX_ENCRYPTION_KEYS: 'OUTBOX_ENCRYPTION_KEY',
  CODE_HASH_KEYS: 'CODE_HASH_KEY',
}

/** The problem of a setting a process needs in staging and production but lacks (naming the single-key form where there is one). */
export function missingInProduction(
  variable: string,
  role: ProcessRole,
  nodeEnv: string,
  condition = '',
): { variable: string; problem: string } {
  const single = SINGLE_KEY_OF[variable]
  return {
    variable,
    problem: `is required for the ${role} process in ${nodeEnv}${condition}${single ? ` (or the single-key ${single})` : ''}`,
  }
}

/**
 * A ring from `…_KEYS`, or the single `…_KEY` as a one-entry ring. Both may be set while moving
 * from one to the other, as long as the single key is in the ring (so no process restarted in
 * between seals or hashes under a key the others do not know).
 */
function resolveRing(ring: KeyRing | undefined, single: Buffer | undefined, variable: string, singleVariable: string): KeyRing | undefined {
  if (ring && single && !ring.some((entry) => entry.key.equals(single))) {
    throw new ConfigError([
      {
        variable: singleVariable,
        problem: `is set beside ${variable} with a key that is not in it; keep one of them (the single key is read as ${variable}=0:<key>)`,
      },
    ])
  }
  return ring ?? (single ? singleKeyRing(single) : undefined)
}

/** Core URLs that must be https:// in staging and production: links never plain, a local mirror may be. */
export const HTTPS_ONLY_IN_PRODUCTION: Readonly<Record<string, 'loopback' | 'never'>> = {
  INVITATION_LINK_BASE_URL: 'never',
  PUBLIC_BASE_URL: 'never',
  // A self-hosted copy of the range API may listen on this machine; a remote one only over TLS.
  BREACHED_PASSWORD_API_URL: 'loopback',
}

/** The problems of URL settings that are not https:// in staging and production (plain http only to this machine where allowed). */
export function insecureUrls(
  config: Readonly<Record<string, unknown>>,
  rules: Readonly<Record<string, 'loopback' | 'never'>>,
  nodeEnv: string,
): { variable: string; problem: string }[] {
  return Object.entries(rules).flatMap(([variable, allowed]) => {
    const value = config[variable]
    if (typeof value !== 'string') return []
    const link = new URL(value)
    if (link.protocol === 'https:' || (allowed === 'loopback' && isLoopback(link))) return []
    return [
      {
        variable,
        problem: `must be an https:// URL in ${nodeEnv}${allowed === 'loopback' ? ' (plain http only to a relay on this machine: localhost, 127.x, [::1])' : ''}`,
      },
    ]
  })
}

/**
 * The web's public origin: PUBLIC_BASE_URL without a trailing slash, or in development and test
 * this machine's web (`http://localhost:$PORT`).
 */
export function publicBaseUrl(config: Pick<CoreConfig, 'NODE_ENV' | 'PORT'> & Partial<Pick<CoreConfig, 'PUBLIC_BASE_URL'>>): string {
  return (config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '')
}

/**
 * Parses the environment with `schema` (the core and every provider's slice): blank values are
 * unset, an invalid value is a ConfigError naming the variable, and the key rings are resolved.
 */
export function parseEnvironment<T extends z.ZodObject>(schema: T, env: NodeJS.ProcessEnv): Omit<z.output<T>, keyof Rings> & Rings {
  const blankless = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''))
  const parsed = schema.safeParse(blankless)
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => ({
        variable: String(issue.path[0] ?? 'environment'),
        problem: issue.message,
      })),
    )
  }
  const data = parsed.data as z.output<T> & {
    OUTBOX_ENCRYPTION_KEY?: Buffer
    CODE_HASH_KEY?: Buffer
    OUTBOX_ENCRYPTION_KEYS?: KeyRing
    CODE_HASH_KEYS?: KeyRing
  }
  return {
    ...data,
    OUTBOX_ENCRYPTION_KEYS: resolveRing(
      data.OUTBOX_ENCRYPTION_KEYS,
      data.OUTBOX_ENCRYPTION_KEY,
      'OUTBOX_ENCRYPTION_KEYS',
      'OUTBOX_ENCRYPTION_KEY',
    ),
    CODE_HASH_KEYS: resolveRing(data.CODE_HASH_KEYS, data.CODE_HASH_KEY, 'CODE_HASH_KEYS', 'CODE_HASH_KEY'),
  }
}

/** The core's checks that need more than one variable: the role names, and the rules of staging and production. */
export function checkRoleNames(config: CoreConfig): void {
  if ((config.SEALPOST_API_ROLE === undefined) !== (config.SEALPOST_WORKER_ROLE === undefined)) {
    const missing = config.SEALPOST_API_ROLE === undefined ? 'SEALPOST_API_ROLE' : 'SEALPOST_WORKER_ROLE'
    throw new ConfigError([
      {
        variable: missing,
        problem: 'is required when the other of SEALPOST_API_ROLE / SEALPOST_WORKER_ROLE is set: name both existing roles, or neither',
      },
    ])
  }
  if (config.SEALPOST_API_ROLE !== undefined && config.SEALPOST_API_ROLE === config.SEALPOST_WORKER_ROLE) {
    throw new ConfigError([
      {
        variable: 'SEALPOST_WORKER_ROLE',
        problem: 'must name another role than SEALPOST_API_ROLE: web and worker hold different privileges',
      },
    ])
  }
}

/** The lease and the retry schedule, checked once every other setting is known. */
export function checkTiming(config: CoreConfig, role: ProcessRole): void {
  const minLeaseSeconds = minimumLeaseSeconds(config.SEND_TIMEOUT_MS)
  // Only the processes that apply LEASE_SECONDS check it; the worker checks the queue's own lease.
  if ((role === 'release' || role === 'all-in-one') && config.LEASE_SECONDS < minLeaseSeconds) {
    throw new ConfigError([
      {
        variable: 'LEASE_SECONDS',
        problem: `must be at least 2 × SEND_TIMEOUT_MS + 5 s (${minLeaseSeconds} s) so a slow send never outlives its lease`,
      },
    ])
  }
  if (config.RETRY_SCHEDULE.length < config.MAX_ATTEMPTS - 1) {
    throw new ConfigError([{ variable: 'RETRY_SCHEDULE', problem: 'needs at least MAX_ATTEMPTS - 1 entries' }])
  }
}
