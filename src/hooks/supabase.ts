import { z } from 'zod'
import { SECURITY_NOTICE_TTL_SECONDS } from '../identity/security-notices.ts'
import type { HookMessage, HookPurpose, HookReading, HookSecret } from './hook-message.ts'
import { supabaseNoticeOf, supabasePhone } from './supabase-notices.ts'

/**
 * Supabase Auth's Send Email and Send SMS hooks (docs/hooks.md): the payloads as supabase/auth
 * builds them (internal/hooks/v0hooks, internal/mailer/mailer.go `EmailData`, internal/api/mail.go
 * `sendEmail`), read into messages. Unknown fields are ignored: Supabase adds fields over time.
 */

/** SUPABASE_EMAIL_CONTENT: what an action that offers both a code and a link sends. */
export type SupabaseEmailContent = 'both' | 'link' | 'code'

/** How this deployment's Supabase builds its links and what to send (docs/hooks.md, per deployment shape). */
export type SupabaseEmailOptions = {
  content?: SupabaseEmailContent
  /** SUPABASE_VERIFY_PATH: Supabase's MAILER_URLPATHS_* value, resolved against `site_url`; unset = `<site_url>/verify`. */
  verifyPath?: string
}

/**
 * The actions that carry a token: those with a link (Supabase's mailer links to `/verify` and
 * also offers the code, `{{ .Token }}`, which apps that verify the typed code need) and the two
 * that carry only a code (`email` is in Supabase's documented enum, though its API never sends it).
 */
const LINK_ACTIONS: ReadonlySet<string> = new Set(['signup', 'recovery', 'magiclink', 'invite', 'email_change'])
const CODE_ACTIONS: Readonly<Record<string, HookPurpose>> = Object.freeze({ email: 'verification_code', reauthentication: 'step_up' })

const OTP = z.string().regex(/^\d{6,10}$/)
// Fields an action does not use are sent as "": each of these reads "" as absent.
const ABSENT_OR_OTP = z.string().regex(/^(?:\d{6,10})?$/)
// Supabase's token hash: hex SHA-224, `pkce_` prefixed in the PKCE flow.
const ABSENT_OR_TOKEN_HASH = z.string().regex(/^(?:[A-Za-z0-9_-]{16,128})?$/)
const HTTP_URL = z.url({ protocol: /^https?$/ }).max(2048)
// Any absolute URI Supabase's allow-list let through (a native app's `com.example.app://callback`
// too, internal/utilities/request.go): it only travels inside the link's query string.
const NEVER_REDIRECT = /^(?:javascript|data|vbscript|file):/i
const ABSENT_OR_URI = z
  .string()
  .max(2048)
  .refine(
    (text) => text === '' || (/^[A-Za-z][A-Za-z0-9+.-]*:[^\s\p{Cc}]+$/u.test(text) && !NEVER_REDIRECT.test(text) && URL.canParse(text)),
  )
const TEXT = z.string().max(320).optional()

export const SupabaseEmailHookPayload = z.object({
  user: z.object({ email: TEXT, new_email: TEXT, phone: TEXT }),
  email_data: z.object({
    email_action_type: z.string().max(64),
    token: ABSENT_OR_OTP.optional(),
    token_hash: ABSENT_OR_TOKEN_HASH.optional(),
    token_new: ABSENT_OR_OTP.optional(),
    token_hash_new: ABSENT_OR_TOKEN_HASH.optional(),
    redirect_to: ABSENT_OR_URI.optional(),
    site_url: HTTP_URL,
    old_email: TEXT,
    old_phone: TEXT,
    provider: TEXT,
    factor_type: TEXT,
  }),
})
export type SupabaseEmailPayload = z.infer<typeof SupabaseEmailHookPayload>
type EmailData = SupabaseEmailPayload['email_data']

export const SupabaseSmsHookPayload = z.object({
  user: z.object({ phone: z.string().max(32).optional() }),
  sms: z.object({ otp: OTP, phone: z.string().max(32).optional(), sms_type: z.string().max(32).optional() }),
})

/**
 * The link Supabase itself would put in the email: its verify endpoint, then `?token=<token_hash>
 * &type=<action>&redirect_to=<redirect_to>` (internal/mailer/templatemailer `getPath`). The endpoint
 * is SUPABASE_VERIFY_PATH resolved against `site_url` (the Auth API's external URL) as Go's
 * `ResolveReference` does, or `<site_url>/verify` without one.
 */
export function supabaseVerifyLink(
  data: Pick<EmailData, 'site_url' | 'redirect_to' | 'email_action_type'>,
  tokenHash: string,
  verifyPath?: string,
): string {
  const query = new URLSearchParams({ token: tokenHash, type: data.email_action_type })
  if (data.redirect_to) query.set('redirect_to', data.redirect_to)
  const endpoint = verifyPath ? new URL(verifyPath, data.site_url).toString() : `${data.site_url.replace(/\/+$/, '')}/verify`
  return `${endpoint}?${query.toString()}`
}

function secretOf(
  data: EmailData,
  options: SupabaseEmailOptions,
  code: string | undefined,
  tokenHash: string | undefined,
): HookSecret | null {
  if (!LINK_ACTIONS.has(data.email_action_type)) return code ? { code } : null
  const content = options.content ?? 'both'
  if (content === 'code') return code ? { code } : null
  if (!tokenHash) return null
  const link = supabaseVerifyLink(data, tokenHash, options.verifyPath)
  return content === 'both' && code ? { link, code } : { link }
}

/**
 * Who gets what: the field names of an email change are historical (Supabase's note):
 * with Secure Email Change on, `token` with `token_hash_new` go to the current address
 * (`user.email`), `token_new` with `token_hash` to the new one (`user.new_email`); with it off
 * there is one pair, for the new address.
 */
function pairsOf({ user, email_data: data }: SupabaseEmailPayload) {
  if (data.email_action_type !== 'email_change') return [{ to: user.email, code: data.token, tokenHash: data.token_hash }]
  if (data.token_hash && data.token_hash_new)
    return [
      { to: user.email, code: data.token, tokenHash: data.token_hash_new },
      { to: user.new_email, code: data.token_new, tokenHash: data.token_hash },
    ]
  return [{ to: user.new_email, code: data.token || data.token_new, tokenHash: data.token_hash || data.token_hash_new }]
}

/** The messages of one Send Email Hook call: a code and/or link per address, or a security notice. */
export function readSupabaseEmailHook(payload: unknown, options: SupabaseEmailOptions = {}): HookReading {
  const parsed = SupabaseEmailHookPayload.safeParse(payload)
  if (!parsed.success) return { refusal: 'malformed' }
  const { email_data: data } = parsed.data
  const action = data.email_action_type
  if (action.endsWith('_notification')) return noticeReading(parsed.data)
  if (!LINK_ACTIONS.has(action) && !Object.hasOwn(CODE_ACTIONS, action)) return { refusal: 'unsupported_kind' }
  const messages: HookMessage[] = []
  for (const pair of pairsOf(parsed.data)) {
    const secret = secretOf(data, options, pair.code || undefined, pair.tokenHash || undefined)
    if (!pair.to || !secret) return { refusal: 'malformed' }
    const purpose: HookPurpose = 'link' in secret ? 'magic_link' : (CODE_ACTIONS[action] ?? 'verification_code')
    messages.push({
      purpose,
      channel: 'email',
      destination: pair.to,
      secret,
      sameness: JSON.stringify(['supabase-email', action, pair.to, secret]),
    })
  }
  return { messages }
}

function noticeReading(payload: SupabaseEmailPayload): HookReading {
  const notice = supabaseNoticeOf(payload)
  if (notice === 'unsupported') return { refusal: 'unsupported_kind' }
  if (!notice) return { refusal: 'malformed' }
  const secret = { notice: { event: notice.event, identifier: notice.identifier } }
  // Two notices of one kind are two messages: the call's metadata names it, and stays the same on Supabase's retries.
  const call = (payload as { metadata?: { uuid?: unknown } }).metadata?.uuid
  return {
    messages: [
      {
        purpose: 'security_notice',
        channel: 'email',
        destination: notice.to,
        secret,
        ttlSeconds: SECURITY_NOTICE_TTL_SECONDS,
        sameness: JSON.stringify([
          'supabase-email',
          payload.email_data.email_action_type,
          notice.to,
          secret,
          typeof call === 'string' ? call : null,
        ]),
      },
    ],
  }
}

/**
 * The message of one Send SMS Hook call: the OTP to `sms.phone` (what supabase/auth sends today)
 * or `user.phone` (the documented payload), as E.164 (Supabase stores numbers without the `+`). An
 * MFA challenge (`sms_type: mfa`) is a step-up; every other OTP a generic verification code.
 */
export function readSupabaseSmsHook(payload: unknown): HookReading {
  const parsed = SupabaseSmsHookPayload.safeParse(payload)
  if (!parsed.success) return { refusal: 'malformed' }
  const { user, sms } = parsed.data
  const named = sms.phone || user.phone
  if (!named) return { refusal: 'malformed' }
  const destination = supabasePhone(named)
  if (destination === undefined) return { refusal: 'invalid_destination' }
  const purpose: HookPurpose = sms.sms_type === 'mfa' ? 'step_up' : 'verification_code'
  return {
    messages: [
      {
        purpose,
        channel: 'phone',
        destination,
        secret: { code: sms.otp },
        sameness: JSON.stringify(['supabase-sms', purpose, destination, sms.otp]),
      },
    ],
  }
}
