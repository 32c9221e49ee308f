import { isIP } from 'node:net'
import { z } from 'zod'
import { parseKeyRing, singleKeyRing, type KeyRing } from '../src/crypto/key-ring.ts'
import { parseLinkOrigins } from './link-origins.ts'
import { parseChannelCaps, parseCountryCaps } from './send-caps.ts'
import {
  parseTemplateLanguages,
  WHATSAPP_CLOUD_DEFAULT_API_URL,
  WHATSAPP_CLOUD_DEFAULT_LANGUAGES,
  whatsAppProblems,
} from './whatsapp-cloud.ts'
import { SealpostError } from '../src/errors/sealpost-error.ts'

/** Raised when the environment cannot start a process; its message names variables, never values. */
export class ConfigError extends SealpostError {
  override name = 'ConfigError'
  readonly variables: string[]
  constructor(problems: { variable: string; problem: string }[]) {
    super('Invalid configuration:\n' + problems.map((p) => `  - ${p.variable}: ${p.problem}`).join('\n'))
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

/** The email providers Sealpost can drive; EMAIL_PROVIDERS orders some of them. */
export const EMAIL_PROVIDER_IDS = Object.freeze(['ses', 'smtp'] as const)
export type EmailProviderId = (typeof EMAIL_PROVIDER_IDS)[number]

/** Parses `ses,smtp` into the order providers are tried; pure so it can be table-tested. */
export function parseEmailProviders(text: string): EmailProviderId[] {
  const ids = text.split(',').map((part) => part.trim())
  const known = (id: string): id is EmailProviderId => (EMAIL_PROVIDER_IDS as readonly string[]).includes(id)
  if (ids.length === 0 || !ids.every(known) || new Set(ids).size !== ids.length)
    throw new Error(`must be an ordered comma-separated list of ${EMAIL_PROVIDER_IDS.join(', ')}, each at most once`)
  return ids
}

/** `smtp://` or `smtps://` with a host; the value holds a password, so the problem never quotes it. */
const smtpUrl = z.string().refine(
  (text) => {
    try {
      const url = new URL(text)
      return (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== ''
    } catch {
      return false
    }
  },
  {
    message:
      'must be smtp://user:password@host:587 (STARTTLS) or smtps://user:password@host:465 (implicit TLS), reserved characters percent-encoded',
  },
)

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

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback)
const url = z.url({ protocol: /^(postgres|postgresql|https?)$/ })

export const envSchema = z.object({
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
  SES_REGION: z.string().min(1).optional(),
  SES_FROM_ADDRESS: z.email().optional(),
  SES_ENDPOINT: url.optional(),
  WASENDER_API_URL: url.optional(),
  WASENDER_API_KEY: z.string().min(1).optional(),
  /** Which WhatsApp provider sends (default: the configured one; both configured = refused without it). */
  WHATSAPP_PROVIDER: z.enum(['cloud', 'wasender']).optional(),
  WHATSAPP_CLOUD_API_URL: url.default(WHATSAPP_CLOUD_DEFAULT_API_URL),
  WHATSAPP_CLOUD_ACCESS_TOKEN: z.string().min(1).optional(),
  WHATSAPP_CLOUD_PHONE_NUMBER_ID: z
    .string()
    .regex(/^\d{1,32}$/, 'the numeric phone number id')
    .optional(),
  /** The approved authentication template's name. */
  WHATSAPP_CLOUD_TEMPLATE: z
    .string()
    .regex(/^[a-z0-9_]{1,512}$/, 'a template name: lowercase letters, digits and _')
    .optional(),
  /** Our locale → the template's language code, `en:en_US,de:de`; the first is the fallback. */
  WHATSAPP_CLOUD_TEMPLATE_LANGUAGES: z
    .string()
    .default(WHATSAPP_CLOUD_DEFAULT_LANGUAGES)
    .refine((text) => {
      try {
        return parseTemplateLanguages(text).fallback !== ''
      } catch {
        return false
      }
    }, 'expected locale:language pairs like en:en_US,de:de,es:es'),
  /** Twilio (SMS, docs/delivery.md "Channels"): all of its settings or none (loadConfig checks the set). */
  TWILIO_ACCOUNT_SID: z
    .string()
    .regex(/^AC[0-9a-fA-F]{32}$/, 'must be an account SID (AC followed by 32 hex digits)')
    .optional(),
  TWILIO_AUTH_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  TWILIO_API_KEY_SID: z
    .string()
    .regex(/^SK[0-9a-fA-F]{32}$/, 'must be an API key SID (SK followed by 32 hex digits)')
    .optional(),
  TWILIO_API_KEY_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  TWILIO_MESSAGING_SERVICE_SID: z
    .string()
    .regex(/^MG[0-9a-fA-F]{32}$/, 'must be a Messaging Service SID (MG followed by 32 hex digits)')
    .optional(),
  TWILIO_FROM_NUMBER: z
    .string()
    .regex(
      /^(\+[1-9]\d{7,14}|\d{3,8}|(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11})$/,
      'must be an E.164 number, a short code or an alphanumeric sender ID',
    )
    .optional(),
  TWILIO_API_URL: url.default('https://api.twilio.com'),
  /** The web's public https origin, as the internet reaches it (Twilio's status callbacks are built from it and signed over it). */
  PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** The email providers in the order they are tried, `ses,smtp` (docs/configuration.md). */
  EMAIL_PROVIDERS: z
    .string()
    .default('ses')
    .transform((text, ctx) => {
      try {
        return parseEmailProviders(text)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message })
        return z.NEVER
      }
    }),
  /** The phone channels in fallback order, `whatsapp,sms`; unset = those the fleet has, WhatsApp first (docs/delivery.md "Phone channels"). */
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
  /** The relay of the `smtp` email provider, credentials in the URL. */
  SMTP_URL: smtpUrl.optional(),
  /** The sender address of mail through SMTP (default: SES_FROM_ADDRESS). */
  SMTP_FROM_ADDRESS: z.email().optional(),
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
  /** Fleet-wide SMS sends per clock hour (the `sms` channel's cap; the smaller wins beside SEND_CAP_PER_HOUR's); unset = no cap. */
  SMS_HOURLY_CAP: z.coerce.number().int().min(0).optional(),
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
  /** Development only: where the in-process SES emulator listens (0 = any free port). */
  SES_EMULATOR_PORT: z.coerce.number().int().min(0).max(65535).default(8005),
  /** Development only: where `.data/` (embedded PostgreSQL, generated keys) lives. */
  SEALPOST_DATA_DIR: z.string().min(1).default('.data'),
  /** SES configuration set named on every SendEmail (its event destination publishes to the SNS topic). */
  SES_CONFIGURATION_SET: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)')
    .optional(),
  /** The SNS topic whose deliveries POST /webhooks/ses accepts; unset = the route refuses everything. */
  SES_EVENTS_TOPIC_ARN: z
    .string()
    .regex(/^arn:aws:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN')
    .optional(),
  /** Tests and local runs only: a PEM certificate that replaces the fetch of SNS signing certificates. */
  SNS_TEST_SIGNING_CERT: z.string().min(1).optional(),
  /** The webhook secret of the Wasender session; unset = POST /webhooks/wasender refuses everything. */
  WASENDER_WEBHOOK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /** The Meta app's secret, which signs WhatsApp Cloud API webhooks; unset = POST /webhooks/whatsapp-cloud refuses everything. */
  WHATSAPP_CLOUD_APP_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /** The token Meta's subscription handshake must present; unset = GET /webhooks/whatsapp-cloud refuses everything. */
  WHATSAPP_CLOUD_VERIFY_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
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
  /** The sender's display name in the From header (default: PRODUCT_NAME). */
  SES_FROM_NAME: z
    .string()
    .trim()
    .min(1)
    .max(60)
    .regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters')
    .optional(),
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

type Env = z.output<typeof envSchema>
/** The environment as written (strings), before parsing: what docs/configuration.md documents. */
export type EnvInput = z.input<typeof envSchema>

/**
 * The validated configuration; keys are Buffers so they never print by accident as text. The
 * `…_KEYS` rings are the ones to use: a single `…_KEY` is read as a one-entry ring.
 */
export type Config = Omit<Env, 'OUTBOX_ENCRYPTION_KEY' | 'CODE_HASH_KEY' | 'OUTBOX_ENCRYPTION_KEYS' | 'CODE_HASH_KEYS'> & {
  OUTBOX_ENCRYPTION_KEY?: Buffer
  CODE_HASH_KEY?: Buffer
  OUTBOX_ENCRYPTION_KEYS?: KeyRing
  CODE_HASH_KEYS?: KeyRing
}

/** Whether the web serves `GET /docs`: `API_DOCS` when set, else only outside staging and production. */
export function apiDocsEnabled(config: { NODE_ENV?: Config['NODE_ENV']; API_DOCS?: Config['API_DOCS'] }): boolean {
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

/** The process roles of the Procfile plus the CLI; each needs different settings in production. */
export type ProcessRole = 'release' | 'web' | 'worker' | 'cli' | 'all-in-one'

// The worker never hashes a code or counts a budget, so it holds no CODE_HASH_KEYS (least privilege: docs/architecture.md §6).
export const REQUIRED_IN_PRODUCTION: Record<ProcessRole, (keyof Config)[]> = {
  release: ['DATABASE_URL'],
  cli: ['DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'CODE_HASH_KEYS'],
  web: ['API_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'CODE_HASH_KEYS'],
  worker: ['WORKER_DATABASE_URL', 'OUTBOX_ENCRYPTION_KEYS', 'SES_REGION', 'SES_FROM_ADDRESS', 'INVITATION_LINK_BASE_URL'],
  'all-in-one': [],
}

/** Settings of REQUIRED_IN_PRODUCTION that only some configurations use. */
/** Required in production only under a condition (docs/configuration.md: EMAIL_PROVIDERS lists ses). */
export const REQUIRED_ONLY_WHEN: Partial<Record<keyof Config, (config: Config) => boolean>> = {
  SES_REGION: (config) => config.EMAIL_PROVIDERS.includes('ses'),
  SES_FROM_ADDRESS: (config) => config.EMAIL_PROVIDERS.includes('ses'),
}

const SINGLE_KEY_OF: Partial<Record<keyof Config, string>> = {
  OUTBOX_ENCRYPTION_KEYS: 'OUTBOX_ENCRYPTION_KEY',
  CODE_HASH_KEYS: 'CODE_HASH_KEY',
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

/** Provider endpoints may speak plain HTTP only to this machine (a local relay); links never. */
const HTTPS_ONLY_IN_PRODUCTION = {
  SES_ENDPOINT: 'loopback',
  WASENDER_API_URL: 'loopback',
  WHATSAPP_CLOUD_API_URL: 'loopback',
  TWILIO_API_URL: 'loopback',
  INVITATION_LINK_BASE_URL: 'never',
  PUBLIC_BASE_URL: 'never',
  // A self-hosted copy of the range API may listen on this machine; a remote one only over TLS.
  BREACHED_PASSWORD_API_URL: 'loopback',
} as const

function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
}

/**
 * Whether the SMTP connector may send without TLS when the relay offers no STARTTLS: only an
 * `smtp://` relay on this machine, and only in development and test. Everywhere else `smtp://`
 * requires STARTTLS and `smtps://` is TLS from the first byte.
 */
export function smtpPlainAllowed(config: Pick<Config, 'NODE_ENV' | 'SMTP_URL'>): boolean {
  if (config.NODE_ENV !== 'development' && config.NODE_ENV !== 'test') return false
  if (!config.SMTP_URL) return false
  const url = new URL(config.SMTP_URL)
  return url.protocol === 'smtp:' && isLoopback(url)
}

const TWILIO_SETTINGS = [
  'TWILIO_ACCOUNT_SID',
  'TWILIO_AUTH_TOKEN',
  'TWILIO_API_KEY_SID',
  'TWILIO_API_KEY_SECRET',
  'TWILIO_MESSAGING_SERVICE_SID',
  'TWILIO_FROM_NUMBER',
] as const

/** Whether Twilio is configured (SMS): any of its settings set (loadConfig refuses half a set). */
export function twilioConfigured(config: Partial<Pick<Config, (typeof TWILIO_SETTINGS)[number]>>): boolean {
  return TWILIO_SETTINGS.some((name) => config[name] !== undefined)
}

/**
 * Twilio is optional, but half of it is a typo, never a choice: the account SID and its auth
 * token (which signs every status callback, even when an API key sends), an API key's SID and
 * secret both or neither, exactly one sender, and outside development the public origin its
 * callbacks go to.
 */
function assertTwilioComplete(config: Config, deployed: boolean): void {
  if (!twilioConfigured(config)) return
  const problems: { variable: string; problem: string }[] = []
  for (const variable of ['TWILIO_ACCOUNT_SID', 'TWILIO_AUTH_TOKEN'] as const)
    if (config[variable] === undefined)
      problems.push({ variable, problem: 'is required when any TWILIO_* is set (the auth token also signs the status callbacks)' })
  if ((config.TWILIO_API_KEY_SID === undefined) !== (config.TWILIO_API_KEY_SECRET === undefined))
    for (const variable of ['TWILIO_API_KEY_SID', 'TWILIO_API_KEY_SECRET'])
      problems.push({ variable, problem: 'set both TWILIO_API_KEY_SID and TWILIO_API_KEY_SECRET, or neither to send with the auth token' })
  if ((config.TWILIO_MESSAGING_SERVICE_SID === undefined) === (config.TWILIO_FROM_NUMBER === undefined))
    for (const variable of ['TWILIO_MESSAGING_SERVICE_SID', 'TWILIO_FROM_NUMBER'])
      problems.push({ variable, problem: 'set exactly one of TWILIO_MESSAGING_SERVICE_SID and TWILIO_FROM_NUMBER (the SMS sender)' })
  if (deployed && config.PUBLIC_BASE_URL === undefined)
    problems.push({
      variable: 'PUBLIC_BASE_URL',
      problem: `is required in ${config.NODE_ENV} when Twilio is configured (its status callbacks go there)`,
    })
  if (problems.length > 0) throw new ConfigError(problems)
}

/**
 * The web's public origin: PUBLIC_BASE_URL without a trailing slash, or in development and test
 * this machine's web (`http://localhost:$PORT`).
 */
export function publicBaseUrl(config: Pick<Config, 'NODE_ENV' | 'PORT'> & Partial<Pick<Config, 'PUBLIC_BASE_URL'>>): string {
  return (config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '')
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
  const data = parsed.data
  const config: Config = {
    ...data,
    OUTBOX_ENCRYPTION_KEYS: resolveRing(
      data.OUTBOX_ENCRYPTION_KEYS,
      data.OUTBOX_ENCRYPTION_KEY,
      'OUTBOX_ENCRYPTION_KEYS',
      'OUTBOX_ENCRYPTION_KEY',
    ),
    CODE_HASH_KEYS: resolveRing(data.CODE_HASH_KEYS, data.CODE_HASH_KEY, 'CODE_HASH_KEYS', 'CODE_HASH_KEY'),
  }
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
  const sends = role === 'worker' || role === 'all-in-one'
  if (sends && config.EMAIL_PROVIDERS.includes('smtp') && config.SMTP_URL === undefined) {
    throw new ConfigError([{ variable: 'SMTP_URL', problem: 'is required when EMAIL_PROVIDERS lists smtp' }])
  }
  // WhatsApp is optional (no WASENDER_* = no phone channel, docs/delivery.md "Channels"), but half a provider is a typo, never a choice.
  if ((config.WASENDER_API_URL === undefined) !== (config.WASENDER_API_KEY === undefined)) {
    throw new ConfigError(
      (['WASENDER_API_URL', 'WASENDER_API_KEY'] as const).map((variable) => ({
        variable,
        problem: 'set both WASENDER_API_URL and WASENDER_API_KEY for the WhatsApp channel, or neither for no phone channel',
      })),
    )
  }
  const whatsApp = whatsAppProblems(config)
  if (whatsApp.length > 0) throw new ConfigError(whatsApp)
  const deployed = config.NODE_ENV === 'production' || config.NODE_ENV === 'staging'
  assertTwilioComplete(config, deployed)
  if (deployed) {
    if (role === 'all-in-one') {
      throw new ConfigError([
        { variable: 'NODE_ENV', problem: '`npm start` is the development mode; run the Procfile processes in staging and production' },
      ])
    }
    const missing = REQUIRED_IN_PRODUCTION[role].filter(
      (name) => config[name] === undefined && (REQUIRED_ONLY_WHEN[name]?.(config) ?? true),
    )
    const smtpFromMissing =
      role === 'worker' &&
      config.EMAIL_PROVIDERS.includes('smtp') &&
      config.SMTP_FROM_ADDRESS === undefined &&
      config.SES_FROM_ADDRESS === undefined
    if (missing.length > 0 || smtpFromMissing) {
      throw new ConfigError([
        ...missing.map((variable) => {
          const single = SINGLE_KEY_OF[variable]
          return {
            variable,
            problem: `is required for the ${role} process in ${config.NODE_ENV}${single ? ` (or the single-key ${single})` : ''}`,
          }
        }),
        ...(smtpFromMissing
          ? [
              {
                variable: 'SMTP_FROM_ADDRESS',
                problem: `is required for the worker in ${config.NODE_ENV} when EMAIL_PROVIDERS lists smtp (or SES_FROM_ADDRESS)`,
              },
            ]
          : []),
      ])
    }
    const insecure = Object.entries(HTTPS_ONLY_IN_PRODUCTION).filter(([variable, allowed]) => {
      const value = config[variable as keyof typeof HTTPS_ONLY_IN_PRODUCTION]
      if (value === undefined) return false
      const url = new URL(value)
      return url.protocol !== 'https:' && !(allowed === 'loopback' && isLoopback(url))
    })
    if (insecure.length > 0) {
      throw new ConfigError(
        insecure.map(([variable, allowed]) => ({
          variable,
          problem: `must be an https:// URL in ${config.NODE_ENV}${allowed === 'loopback' ? ' (plain http only to a relay on this machine: localhost, 127.x, [::1])' : ''}`,
        })),
      )
    }
  }
  // Only the processes that apply LEASE_SECONDS check it; the worker checks the queue's own lease.
  if (deployed && config.SNS_TEST_SIGNING_CERT !== undefined) {
    throw new ConfigError([
      { variable: 'SNS_TEST_SIGNING_CERT', problem: `is for tests and local runs only and is refused in ${config.NODE_ENV}` },
    ])
  }
  const minLeaseSeconds = minimumLeaseSeconds(config.SEND_TIMEOUT_MS)
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
  return config
}
