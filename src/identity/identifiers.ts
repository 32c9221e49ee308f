import type { Channel } from '../outbox/constants.ts'
import { canonicalDestination as canonicalDestinationOf } from '../outbox/destination.ts'
import { phoneNumberAccepted, readPhoneNumber, smsAllowedFor, type PhoneNumberPolicy } from '../outbox/phone-numbers.ts'

/** A normalized login identifier: lower-case email or E.164 phone. */
export type Identifier = { kind: 'email' | 'phone'; value: string }

// ASCII only, deliberately: the provider is the judge of deliverability, and refusing non-ASCII
// keeps look-alike (confusable) addresses from becoming second accounts for the same person.
const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/

/**
 * Parses what a person typed; undefined when it is neither an email address nor a phone number
 * written with its `+` and calling code. A phone becomes libphonenumber's E.164 spelling, so
 * `+44 (0)7911 123-456` and `+447911123456` are one identifier (one account, one budget, one
 * suppression). Whether a code may go to it is `phoneRefusal`'s question, not this one's: an
 * existing account keeps signing in and removing its numbers whatever their type.
 */
export function parseIdentifier(raw: string): Identifier | undefined {
  const text = raw.trim()
  if (text.startsWith('+')) {
    const reading = readPhoneNumber(text)
    return reading ? { kind: 'phone', value: reading.e164 } : undefined
  }
  const email = text.toLowerCase()
  return email.length <= 254 && EMAIL.test(email) ? { kind: 'email', value: email } : undefined
}

/**
 * Why a code may not be sent to this identifier, before anything is looked up: a phone number
 * that is not a valid mobile (or an allowed fixed line or VoIP number), or one outside
 * SMS_ALLOWED_COUNTRIES when SMS is the only phone channel the fleet delivers on. Undefined for
 * an email address and every acceptable number. Pure: known and unknown numbers are answered alike.
 */
export function phoneRefusal(
  identifier: Identifier,
  policy: PhoneNumberPolicy,
  channels: { has(channel: Channel): boolean },
): 'unsupported_phone_number' | undefined {
  if (identifier.kind !== 'phone') return undefined
  const reading = readPhoneNumber(identifier.value)
  if (!reading || !phoneNumberAccepted(reading, policy)) return 'unsupported_phone_number'
  const smsOnly = channels.has('sms') && !channels.has('whatsapp')
  if (smsOnly && !smsAllowedFor(identifier.value, policy.smsCountries)) return 'unsupported_phone_number'
  return undefined
}

/**
 * The channel family's first channel: email, or WhatsApp for a phone number. Canonical forms and
 * suppression hashes are the same on every phone channel; the channel a code is actually enqueued
 * on is PHONE_CHANNELS' (src/identity/challenges.ts `deliveryChannelFor`).
 */
export function channelFor(identifier: Identifier): Channel {
  return identifier.kind === 'email' ? 'email' : 'whatsapp'
}

/** The mailbox or phone a destination budget counts against (src/outbox/destination.ts has the rule). */
export function canonicalDestination(identifier: Identifier): string {
  return canonicalDestinationOf(channelFor(identifier), identifier.value)
}

/**
 * An identifier as a security notice or a staff page shows it: enough to recognise, not to use
 * (`a•••e@e•••.com`, `+49••••1234`); the same text as the database's `outbox.mask_destination`.
 */
export function maskIdentifier(value: string): string {
  const at = value.indexOf('@')
  if (at < 0) return value.slice(0, 3) + '•'.repeat(Math.max([...value].length - 7, 1)) + value.slice(-4)
  const local = value.slice(0, at)
  const domain = value.slice(at + 1)
  const label = domain.split('.')[0]!
  const rest = domain.slice(label.length + 1)
  return `${local.slice(0, 1)}•••${local.length > 1 ? local.slice(-1) : ''}@${label.slice(0, 1)}•••${rest ? `.${rest}` : ''}`
}
