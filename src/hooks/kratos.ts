import { createHash, timingSafeEqual } from 'node:crypto'
import { z } from 'zod'
import type { HookMessage, HookPurpose, HookReading, HookSecret } from './hook-message.ts'

/**
 * Ory Kratos' courier over HTTP (`courier.channels[].type: http`, docs/hooks.md): Kratos posts each
 * message as the body its `request_config.body` Jsonnet builds. The default Jsonnet (ory/kratos
 * embedx/config.schema.json) gives `{recipient, template_type, to, recovery_code, recovery_url,
 * verification_url, verification_code, subject, body}`; the one docs/hooks.md shows adds
 * `login_code`, `registration_code`, `expires_in_minutes` and `message_type` from the same
 * `template_data`. `subject` and `body` (Kratos' own rendering, the code inside) are never read.
 */

type TemplateRule = {
  purpose: HookPurpose
  code?: 'recovery_code' | 'verification_code' | 'login_code' | 'registration_code'
  link?: 'recovery_url' | 'verification_url'
}

/**
 * Each template type that carries a code or a link, and the field it is in (a link goes out as a
 * `magic_link`; `verification_code_valid`'s link beside its code is left out: the code is what the
 * user was shown to expect). The `*_invalid` ones (a recovery or verification asked for an address
 * without an account) carry no secret, are sent only with Kratos' `notify_unknown_recipients` on,
 * and are refused like every type not listed.
 */
export const KRATOS_TEMPLATES: Readonly<Record<string, TemplateRule>> = Object.freeze({
  recovery_code_valid: { purpose: 'password_recovery', code: 'recovery_code' },
  recovery_valid: { purpose: 'magic_link', link: 'recovery_url' },
  verification_code_valid: { purpose: 'verification_code', code: 'verification_code' },
  verification_valid: { purpose: 'magic_link', link: 'verification_url' },
  login_code_valid: { purpose: 'verification_code', code: 'login_code' },
  registration_code_valid: { purpose: 'sign_up', code: 'registration_code' },
})

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
  expires_in_minutes: field(
    z
      .number()
      .int()
      .min(1)
      .max(24 * 60),
  ),
})

const digest = (text: string) => createHash('sha256').update(text).digest()

/**
 * Kratos authenticates with its `request_config.auth`: `api_key` in the `Authorization` header
 * with the value `Bearer <KRATOS_COURIER_API_KEY>`, or `basic_auth` whose password is the key (the
 * user name is not checked). Compared as SHA-256 digests, in constant time whatever the length.
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
  return timingSafeEqual(digest(presented), digest(apiKey))
}

/** The message of one Kratos courier request: its template type's code and/or link, to `to` (or the recipient). */
export function readKratosCourier(body: unknown): HookReading {
  const parsed = KratosCourierBody.safeParse(body)
  if (!parsed.success) return { refusal: 'malformed' }
  const payload = parsed.data
  const rule = Object.hasOwn(KRATOS_TEMPLATES, payload.template_type) ? KRATOS_TEMPLATES[payload.template_type] : undefined
  if (!rule) return { refusal: 'unsupported_kind' }
  const code = (rule.code && payload[rule.code]) || undefined
  const link = (rule.link && payload[rule.link]) || undefined
  const secret: HookSecret | null = code ? { code } : link ? { link } : null
  if (!secret) return { refusal: 'malformed' }
  const destination = payload.to || payload.recipient
  const channel = (payload.message_type || (destination.includes('@') ? 'email' : 'sms')) === 'email' ? 'email' : 'phone'
  if (channel === 'phone' && !/^\+\d{8,15}$/.test(destination)) return { refusal: 'malformed' }
  const message: HookMessage = {
    purpose: rule.purpose,
    channel,
    destination,
    secret,
    sameness: JSON.stringify(['kratos', payload.template_type, destination, secret]),
  }
  if (payload.expires_in_minutes) message.ttlSeconds = payload.expires_in_minutes * 60
  return { messages: [message] }
}
