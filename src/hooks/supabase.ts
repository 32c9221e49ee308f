import { z } from 'zod'
import type { HookMessage, HookPurpose, HookReading, HookSecret } from './hook-message.ts'

/**
 * Supabase Auth's Send Email and Send SMS hooks (docs/hooks.md): the payloads as Supabase documents
 * them (supabase.com/docs/guides/auth/auth-hooks/send-email-hook, …/send-sms-hook) and as
 * supabase/auth builds them (internal/hooks/v0hooks, internal/api/mail.go), read into messages.
 * Unknown fields are ignored: Supabase adds fields over time.
 */

type ActionRule = { purpose: HookPurpose; send: 'code' | 'link' }

/**
 * Each `email_action_type` that carries a secret: what it is sent as. Where Supabase offers a link,
 * the link is sent (as its own mailer does by default): `/verify` completes the action whether the
 * application also asks for the code or not. The two code-only actions send the code.
 */
export const SUPABASE_EMAIL_ACTIONS: Readonly<Record<string, ActionRule>> = Object.freeze({
  signup: { purpose: 'magic_link', send: 'link' },
  recovery: { purpose: 'magic_link', send: 'link' },
  magiclink: { purpose: 'magic_link', send: 'link' },
  invite: { purpose: 'magic_link', send: 'link' },
  email_change: { purpose: 'magic_link', send: 'link' },
  email: { purpose: 'verification_code', send: 'code' },
  reauthentication: { purpose: 'step_up', send: 'code' },
})

const OTP = z.string().regex(/^\d{6,10}$/)
// Fields an action does not use are sent as "": each of these reads "" as absent.
const ABSENT_OR_OTP = z.string().regex(/^(?:\d{6,10})?$/)
// Supabase's token hash: hex SHA-224, `pkce_` prefixed in the PKCE flow.
const ABSENT_OR_TOKEN_HASH = z.string().regex(/^(?:[A-Za-z0-9_-]{16,128})?$/)
const HTTP_URL = z.url({ protocol: /^https?$/ }).max(2048)
const ABSENT_OR_HTTP_URL = z
  .string()
  .max(2048)
  .refine((text) => text === '' || HTTP_URL.safeParse(text).success, 'an http(s) URL')

export const SupabaseEmailHookPayload = z.object({
  user: z.object({
    email: z.string().max(320).optional(),
    new_email: z.string().max(320).optional(),
  }),
  email_data: z.object({
    email_action_type: z.string().max(64),
    token: ABSENT_OR_OTP.optional(),
    token_hash: ABSENT_OR_TOKEN_HASH.optional(),
    token_new: ABSENT_OR_OTP.optional(),
    token_hash_new: ABSENT_OR_TOKEN_HASH.optional(),
    redirect_to: ABSENT_OR_HTTP_URL.optional(),
    site_url: HTTP_URL,
  }),
})
type EmailData = z.infer<typeof SupabaseEmailHookPayload>['email_data']

export const SupabaseSmsHookPayload = z.object({
  user: z.object({ phone: z.string().max(32).optional() }),
  sms: z.object({ otp: OTP, phone: z.string().max(32).optional(), sms_type: z.string().max(32).optional() }),
})

/**
 * The link Supabase itself would put in the email: `<site_url>/verify?token=<token_hash>&type=<action>
 * &redirect_to=<redirect_to>` (the default URL path of every action, supabase/auth
 * internal/mailer/templatemailer; `site_url` in the payload is the Auth API's external URL).
 */
export function supabaseVerifyLink(data: Pick<EmailData, 'site_url' | 'redirect_to' | 'email_action_type'>, tokenHash: string): string {
  const query = new URLSearchParams({ token: tokenHash, type: data.email_action_type })
  if (data.redirect_to) query.set('redirect_to', data.redirect_to)
  return `${data.site_url.replace(/\/+$/, '')}/verify?${query.toString()}`
}

function secretOf(rule: ActionRule, data: EmailData, code: string | undefined, tokenHash: string | undefined): HookSecret | null {
  if (rule.send === 'code') return code ? { code } : null
  return tokenHash ? { link: supabaseVerifyLink(data, tokenHash) } : null
}

/**
 * The messages of one Send Email Hook call. An email change with Secure Email Change on carries two
 * pairs and sends two messages; the field names are historical (Supabase's note): `token` with
 * `token_hash_new` go to the current address (`user.email`), `token_new` with `token_hash` to the
 * new one (`user.new_email`). With it off there is one pair, for the new address.
 */
export function readSupabaseEmailHook(payload: unknown): HookReading {
  const parsed = SupabaseEmailHookPayload.safeParse(payload)
  if (!parsed.success) return { refusal: 'malformed' }
  const { user, email_data: data } = parsed.data
  const rule = Object.hasOwn(SUPABASE_EMAIL_ACTIONS, data.email_action_type) ? SUPABASE_EMAIL_ACTIONS[data.email_action_type] : undefined
  if (!rule) return { refusal: 'unsupported_kind' }
  const pairs: { to: string | undefined; code: string | undefined; tokenHash: string | undefined }[] =
    data.email_action_type !== 'email_change'
      ? [{ to: user.email, code: data.token, tokenHash: data.token_hash }]
      : data.token_hash && data.token_hash_new
        ? [
            { to: user.email, code: data.token, tokenHash: data.token_hash_new },
            { to: user.new_email, code: data.token_new, tokenHash: data.token_hash },
          ]
        : [{ to: user.new_email, code: data.token || data.token_new, tokenHash: data.token_hash || data.token_hash_new }]
  const messages: HookMessage[] = []
  for (const pair of pairs) {
    const secret = secretOf(rule, data, pair.code || undefined, pair.tokenHash || undefined)
    if (!pair.to || !secret) return { refusal: 'malformed' }
    messages.push({
      purpose: rule.purpose,
      channel: 'email',
      destination: pair.to,
      secret,
      sameness: JSON.stringify(['supabase-email', data.email_action_type, pair.to, secret]),
    })
  }
  return { messages }
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
  const raw = (sms.phone || user.phone || '').replace(/[\s()-]/g, '')
  const destination = raw.startsWith('+') ? raw : `+${raw}`
  if (!/^\+\d{8,15}$/.test(destination)) return { refusal: 'malformed' }
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
