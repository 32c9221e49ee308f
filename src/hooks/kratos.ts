import { z } from 'zod'
import { sameSecret } from '../crypto/constant-time.ts'
import { SECURITY_NOTICE_TTL_SECONDS, type SecurityEvent } from '../identity/security-notices.ts'
import { readPhoneNumber } from '../outbox/phone-numbers.ts'
import type { HookMessage, HookPurpose, HookReading, HookSecret } from './hook-message.ts'

/**
 * Ory Kratos' courier over HTTP (`courier.channels[].type: http`, docs/hooks.md): Kratos posts each
 * message as the body its `request_config.body` Jsonnet builds. The default Jsonnet (ory/kratos
 * embedx/config.schema.json) gives `{recipient, template_type, to, recovery_code, recovery_url,
 * verification_url, verification_code, subject, body}`; the one docs/hooks.md recommends adds
 * `login_code`, `registration_code`, `expires_in_minutes`, `message_type` and the account-change
 * notices' `changed_at` and `added_at` from the same `template_data`. Kratos' own rendering (`subject`, `body`) is read only for a code the body
 * carries nowhere else: the default Jsonnet's login and registration codes.
 */

type CodeField = 'recovery_code' | 'verification_code' | 'login_code' | 'registration_code'
type TemplateRule =
  | { purpose: Exclude<HookPurpose, 'magic_link' | 'security_notice'>; codes: readonly CodeField[] }
  | { purpose: 'magic_link'; link: 'recovery_url' | 'verification_url' }
  | { purpose: 'security_notice'; event: SecurityEvent; at?: 'changed_at' | 'added_at' }

/**
 * Every template type Kratos queues (courier/template/type.go) but its test stub, and where its
 * secret is. A code's fields in order: the SMS recovery template names its code
 * `verification_code` (courier/template/sms/recovery_code.go). A link goes out as a `magic_link`;
 * `verification_code_valid`'s link beside its code is left out (the code is what the user was
 * shown to expect). The rest carry no secret and become security notices: an address or a key
 * changed, with the time Kratos stamped the change with (`at`: the template data's `changed_at`,
 * `added_at`, identity/manager.go `sendIdentityNotifications`), or (with Kratos'
 * `notify_unknown_recipients` on) a recovery or verification asked for an address without an account.
 */
export const KRATOS_TEMPLATES: Readonly<Record<string, TemplateRule>> = Object.freeze({
  recovery_code_valid: { purpose: 'password_recovery', codes: ['recovery_code', 'verification_code'] },
  recovery_valid: { purpose: 'magic_link', link: 'recovery_url' },
  verification_code_valid: { purpose: 'verification_code', codes: ['verification_code'] },
  verification_valid: { purpose: 'magic_link', link: 'verification_url' },
  login_code_valid: { purpose: 'verification_code', codes: ['login_code'] },
  registration_code_valid: { purpose: 'sign_up', codes: ['registration_code'] },
  recovery_invalid: { purpose: 'security_notice', event: 'recovery_unknown_address' },
  recovery_code_invalid: { purpose: 'security_notice', event: 'recovery_unknown_address' },
  verification_invalid: { purpose: 'security_notice', event: 'verification_unknown_address' },
  verification_code_invalid: { purpose: 'security_notice', event: 'verification_unknown_address' },
  verifiable_address_changed: { purpose: 'security_notice', event: 'verifiable_address_changed', at: 'changed_at' },
  authenticator_key_added: { purpose: 'security_notice', event: 'authenticator_key_added', at: 'added_at' },
})

/** Kratos' code method lifespan default, 1 h (driver/config/config.go); `expires_in_minutes` is clamped into 1–1440 around it. */
export const KRATOS_CODE_TTL_SECONDS = 3_600

/**
 * How long an account-change notice whose body carries no time of its own (Kratos' default body
 * over SMS, the body docs/hooks.md recommended before it named the time) is the same notice again:
 * Kratos retries a delivery it got no 2xx for at its next pull, a second later by default
 * (`courier.worker.pull_wait`), so its retries fall within it; a retry across a boundary sends a
 * duplicate, and a later change is a new notice.
 */
export const KRATOS_NOTICE_ARRIVAL_WINDOW_SECONDS = 60

// The default Jsonnet sends null for a field the template lacks; a custom one may send "": both read as absent.
const field = <T extends z.ZodType>(schema: T) => z.union([z.null(), schema]).optional()
const CODE = z.string().regex(/^(?:[0-9A-Za-z]{4,16})?$/)
const HTTP_URL = z.url({ protocol: /^https?$/ })
const ABSENT_OR_LINK = z
  .string()
  .max(2048)
  .refine((text) => text === '' || HTTP_URL.safeParse(text).success, 'an http(s) URL')

export const KratosCourierBody = z.object({
  recipient: z.string().min(1).max(320),
  template_type: z.string().max(64),
  to: field(z.string().max(320)),
  message_type: field(z.enum(['email', 'sms', ''])),
  recovery_code: field(CODE),
  verification_code: field(CODE),
  login_code: field(CODE),
  registration_code: field(CODE),
  recovery_url: field(ABSENT_OR_LINK),
  verification_url: field(ABSENT_OR_LINK),
  // Kratos sends whole minutes, 0 below one: any integer is clamped, never refused (a refusal loses the message).
  expires_in_minutes: field(z.number().int()),
  // The account-change notices' event time (RFC 3339 from Kratos): only compared, never parsed or shown.
  changed_at: field(z.string().max(64)),
  added_at: field(z.string().max(64)),
  subject: field(z.string().max(4_096)),
  body: field(z.string().max(32_768)),
})
type KratosBody = z.infer<typeof KratosCourierBody>

/**
 * Kratos authenticates with its `request_config.auth`: `api_key` in the `Authorization` header
 * with the value `Bearer <KRATOS_COURIER_API_KEY>`, or `basic_auth` whose password is the key (the
 * user name is not checked). Compared with `sameSecret`, in constant time whatever the length.
 */
export function kratosAuthorized(apiKey: string, authorization: string | undefined): boolean {
  if (!authorization) return false
  const [scheme, credentials = ''] = authorization.trim().split(/\s+/, 2)
  let presented: string
  if (/^bearer$/i.test(scheme ?? '')) presented = credentials
  else if (/^basic$/i.test(scheme ?? '')) {
    const decoded = Buffer.from(credentials, 'base64').toString('utf8')
    if (!decoded.includes(':')) return false
    presented = decoded.slice(decoded.indexOf(':') + 1)
  } else return false
  return sameSecret(presented, apiKey)
}

// Kratos' codes are six digits (selfservice/strategy/code/strategy.go `CodeLength`), standing alone in its text.
const CODE_IN_TEXT = /(?<![0-9A-Za-z])[0-9]{6}(?![0-9A-Za-z])/g

/** The one code Kratos' rendered subject and body name (every mention the same), or undefined when they name none or several. */
function codeInText(payload: KratosBody): string | undefined {
  const found = new Set(`${payload.subject ?? ''}\n${payload.body ?? ''}`.match(CODE_IN_TEXT) ?? [])
  return found.size === 1 ? [...found][0] : undefined
}

function secretOf(rule: TemplateRule, payload: KratosBody): HookSecret | undefined {
  if (rule.purpose === 'security_notice') return { notice: { event: rule.event, identifier: '' } }
  if ('link' in rule) return payload[rule.link] ? { link: payload[rule.link]! } : undefined
  const code = rule.codes.map((name) => payload[name]).find((value) => value) ?? codeInText(payload)
  return code ? { code } : undefined
}

function ttlOf(rule: TemplateRule, payload: KratosBody): number | undefined {
  if (rule.purpose === 'security_notice') return SECURITY_NOTICE_TTL_SECONDS
  const minutes = payload.expires_in_minutes
  return typeof minutes === 'number' ? Math.min(Math.max(minutes, 1), 24 * 60) * 60 : undefined
}

/** The message of one Kratos courier request: its template type's code, link or notice, to `to` (or the recipient). */
export function readKratosCourier(body: unknown): HookReading {
  const parsed = KratosCourierBody.safeParse(body)
  if (!parsed.success) return { refusal: 'malformed' }
  const payload = parsed.data
  const rule = Object.hasOwn(KRATOS_TEMPLATES, payload.template_type) ? KRATOS_TEMPLATES[payload.template_type] : undefined
  if (!rule) return { refusal: 'unsupported_kind' }
  const secret = secretOf(rule, payload)
  if (!secret) return { refusal: 'malformed' }
  const named = payload.to || payload.recipient
  const channel = (payload.message_type || (named.includes('@') ? 'email' : 'sms')) === 'email' ? 'email' : 'phone'
  const destination = channel === 'phone' ? readPhoneNumber(named)?.e164 : named
  if (destination === undefined) return { refusal: 'invalid_destination' }
  // A notice is told apart from the next one of its kind by Kratos' rendering (the default email's has its time in it);
  // an account change by the time Kratos stamped it with, else by when it arrived. The key holds only an HMAC.
  const rendered = rule.purpose === 'security_notice' ? [payload.subject ?? null, payload.body ?? null] : []
  const at = rule.purpose === 'security_notice' && rule.at ? payload[rule.at] || null : undefined
  const message: HookMessage = {
    purpose: rule.purpose,
    channel,
    destination,
    secret,
    sameness: JSON.stringify(['kratos', payload.template_type, destination, secret, ...rendered, ...(at ? [at] : [])]),
  }
  if (at === null) message.sameWithinSeconds = KRATOS_NOTICE_ARRIVAL_WINDOW_SECONDS
  const ttlSeconds = ttlOf(rule, payload)
  if (ttlSeconds !== undefined) message.ttlSeconds = ttlSeconds
  return { messages: [message] }
}
