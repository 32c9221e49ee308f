import { maskIdentifier } from '../identity/identifiers.ts'
import { readPhoneNumber } from '../outbox/phone-numbers.ts'
import type { SecurityEvent } from '../identity/security-notices.ts'

/** The fields of a Send Email Hook body a notification reads (src/hooks/supabase.ts parses them). */
type NotificationPayload = {
  user: { email?: string | undefined; phone?: string | undefined }
  email_data: { email_action_type: string; old_email?: string | undefined; provider?: string | undefined; factor_type?: string | undefined }
}

/** A notice to send: what happened, to whom, and the detail it names (masked when it is an address). */
export type SupabaseNotice = { event: SecurityEvent; to: string; identifier: string }

/**
 * A number as a Supabase payload names it (Supabase stores numbers without the `+`), read as every
 * number is (libphonenumber: its E.164 spelling); undefined when it is no number.
 */
export function supabasePhone(written: string): string | undefined {
  const text = written.trim()
  return readPhoneNumber(text.startsWith('+') ? text : `+${text}`)?.e164
}

const maskedPhone = (written: string | undefined) => {
  const phone = written ? supabasePhone(written) : undefined
  return phone ? maskIdentifier(phone) : undefined
}

// A provider (`github`, `custom:acme`) or factor type (`totp`, `phone`, `webauthn`) is named in the text: a name, nothing else.
const NAME = /^[A-Za-z0-9_.:-]{1,40}$/
const named = (value: string | undefined) => (value && NAME.test(value) ? value : undefined)

type Rule = (payload: NotificationPayload) => { to: string | undefined; identifier: string | undefined }

/**
 * Supabase Auth's account-change notifications (internal/mailer/mailer.go, sent by
 * internal/api/mail.go with the field each one adds), each to the address Supabase's own mailer
 * writes to (internal/mailer/templatemailer): the old address for an email change, `user.email`
 * for the rest (identity_unlinked too, as Supabase tells hook consumers to).
 */
const RULES: Readonly<Record<string, [SecurityEvent, Rule]>> = Object.freeze({
  password_changed_notification: ['password_changed', ({ user }) => ({ to: user.email, identifier: '' })],
  email_changed_notification: [
    'email_changed',
    ({ user, email_data: data }) => ({ to: data.old_email, identifier: user.email ? maskIdentifier(user.email) : undefined }),
  ],
  phone_changed_notification: ['phone_changed', ({ user }) => ({ to: user.email, identifier: maskedPhone(user.phone) })],
  identity_linked_notification: ['identity_linked', ({ user, email_data: data }) => ({ to: user.email, identifier: named(data.provider) })],
  identity_unlinked_notification: [
    'identity_unlinked',
    ({ user, email_data: data }) => ({ to: user.email, identifier: named(data.provider) }),
  ],
  mfa_factor_enrolled_notification: [
    'mfa_factor_enrolled',
    ({ user, email_data: data }) => ({ to: user.email, identifier: named(data.factor_type) }),
  ],
  mfa_factor_unenrolled_notification: [
    'mfa_factor_unenrolled',
    ({ user, email_data: data }) => ({ to: user.email, identifier: named(data.factor_type) }),
  ],
})

/** The notice a `*_notification` body asks for; null when a field it needs is missing, 'unsupported' for a kind not known. */
export function supabaseNoticeOf(payload: NotificationPayload): SupabaseNotice | null | 'unsupported' {
  const action = payload.email_data.email_action_type
  if (!Object.hasOwn(RULES, action)) return 'unsupported'
  const [event, rule] = RULES[action]!
  const { to, identifier } = rule(payload)
  return to && identifier !== undefined ? { event, to, identifier } : null
}
