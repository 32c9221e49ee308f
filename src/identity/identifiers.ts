import type { Channel } from '../outbox/constants.ts'

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

/** Email goes through SES, a phone number through WhatsApp. */
export function channelFor(identifier: Identifier): Channel {
  return identifier.kind === 'email' ? 'email' : 'whatsapp'
}
