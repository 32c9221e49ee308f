import { createHmac } from 'node:crypto'
import type { Channel } from './constants.ts'

/**
 * The form under which one mailbox or phone is known whatever way it was written: an email
 * address lower-cased with any `+tag` dropped from its local part; a phone in E.164 as given.
 */
export function canonicalDestination(channel: Channel, destination: string): string {
  if (channel === 'whatsapp') return destination.trim()
  const lower = destination.trim().toLowerCase()
  const at = lower.lastIndexOf('@')
  if (at <= 0) return lower
  const local = lower.slice(0, at)
  const plus = local.indexOf('+')
  return `${plus > 0 ? local.slice(0, plus) : local}${lower.slice(at)}`
}

/**
 * The HMAC that stands for a destination on the suppression list (and on its messages), so the
 * list never holds an address. Keyed with the code-hash key, which the web holds; the worker and
 * the webhook only compare stored values.
 */
export function destinationHmac(key: Buffer, channel: Channel, destination: string): Buffer {
  return createHmac('sha256', key).update(`suppression:${channel}:${canonicalDestination(channel, destination)}`).digest()
}
