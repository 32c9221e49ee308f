import { createHmac } from 'node:crypto'
import type { Channel } from './constants.ts'

/**
 * The form under which one mailbox or phone is known whatever way it was written: an email
 * address lower-cased with any `+tag` dropped from its local part (and, for Gmail, which ignores
 * them, its dots, googlemail.com read as gmail.com); a phone in E.164 as given. Budgets and the
 * suppression list count on it; messages still go to the address as written.
 */
export function canonicalDestination(channel: Channel, destination: string): string {
  if (channel === 'whatsapp') return destination.trim()
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
 * The HMAC that stands for a destination on the suppression list (and on its messages), so the
 * list never holds an address. Keyed with the code-hash key, which the web holds; the worker and
 * the webhook only compare stored values.
 */
export function destinationHmac(key: Buffer, channel: Channel, destination: string): Buffer {
  return createHmac('sha256', key)
    .update(`suppression:${channel}:${canonicalDestination(channel, destination)}`)
    .digest()
}
