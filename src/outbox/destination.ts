import { createHmac } from 'node:crypto'
import type { Channel } from './constants.ts'

/** The channels whose destinations are E.164 phone numbers: one number, whichever of them carries it. */
export const PHONE_CHANNELS: ReadonlySet<Channel> = new Set<Channel>(['whatsapp', 'sms'])

/** The phone channels in fallback order when PHONE_CHANNELS does not say: WhatsApp first, then SMS. */
export const PHONE_CHANNEL_ORDER: readonly Channel[] = Object.freeze(['whatsapp', 'sms'])

/**
 * The form under which one mailbox or phone is known whatever way it was written: an email
 * address lower-cased with any `+tag` dropped from its local part (and, for Gmail, which ignores
 * them, its dots, googlemail.com read as gmail.com); a phone in E.164 as given. Budgets count on
 * it (a stranger must not buy more codes for one inbox by varying the address); the suppression
 * list does not (`exactDestination`); messages go to the address as written.
 */
export function canonicalDestination(channel: Channel, destination: string): string {
  if (PHONE_CHANNELS.has(channel)) return destination.trim()
  const lower = destination.trim().toLowerCase()
  const at = lower.lastIndexOf('@')
  if (at <= 0) return lower
  const plus = lower.indexOf('+')
  let local = plus > 0 && plus < at ? lower.slice(0, plus) : lower.slice(0, at)
  let domain = lower.slice(at + 1)
  if (GMAIL_DOMAINS.has(domain)) {
    local = local.replaceAll('.', '')
    domain = 'gmail.com'
  }
  return `${local}@${domain}`
}

const GMAIL_DOMAINS = new Set(['gmail.com', 'googlemail.com'])

/**
 * The one address a provider's bounce or complaint can prove something about: as the identifier
 * stores it (an email trimmed and lower-cased, the whole address: identifiers are lower-cased
 * when parsed, so a recipient that differs from a destination only in case is the address we
 * sent to; a phone as given), never folded to its mailbox, so a variant that bounces suppresses
 * only itself.
 */
export function exactDestination(channel: Channel, destination: string): string {
  return PHONE_CHANNELS.has(channel) ? destination.trim() : destination.trim().toLowerCase()
}

/**
 * The HMAC that stands for one exact destination on the suppression list (and on its messages),
 * so the list never holds an address. Keyed with the code-hash key, which the web holds; the
 * worker only compares stored values, the webhook compares the recipients an event names.
 * The input is the one the canonical form had (`suppression:<channel>:<address>`), so a message
 * enqueued by the previous release to an unvaried address carries the same HMAC
 * (migrations/20261202000300_exact_suppression.ts).
 */
export function destinationHmac(key: Buffer, channel: Channel, destination: string): Buffer {
  // A phone number is one destination on every phone channel, under the label the list has always
  // used for it: a number proven unable to receive is suppressed for all of them.
  const label = PHONE_CHANNELS.has(channel) ? 'whatsapp' : channel
  return createHmac('sha256', key)
    .update(`suppression:${label}:${exactDestination(channel, destination)}`)
    .digest()
}
