import type { Channel } from '../outbox/constants.ts'
import { canonicalDestination as canonicalDestinationOf } from '../outbox/destination.ts'

/** A normalized login identifier: lower-case email or E.164 phone. */
export type Identifier = { kind: 'email' | 'phone'; value: string }

// ASCII only, deliberately: the provider is the judge of deliverability, and refusing non-ASCII
// keeps look-alike (confusable) addresses from becoming second accounts for the same person.
const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/
const E164 = /^\+[1-9]\d{7,14}$/

/** Parses what a person typed; undefined when it is neither an email address nor an E.164 number. */
export function parseIdentifier(raw: string): Identifier | undefined {
  const text = raw.trim()
  if (text.startsWith('+')) return E164.test(text) ? { kind: 'phone', value: text } : undefined
  const email = text.toLowerCase()
  return email.length <= 254 && EMAIL.test(email) ? { kind: 'email', value: email } : undefined
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
