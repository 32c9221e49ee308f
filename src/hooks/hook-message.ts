import { createHmac } from 'node:crypto'
import type { SecurityEvent } from '../identity/security-notices.ts'

/** The purposes an adapter hands the courier core (the courier API's own names, docs/hooks.md), and the notices. */
export type HookPurpose =
  'sign_up' | 'add_sign_in_method' | 'password_recovery' | 'step_up' | 'verification_code' | 'magic_link' | 'security_notice'

/**
 * A code; a link carrying a token, with the code that does the same when the identity system
 * offers one; or a security notice, which carries no secret (what happened, and a detail to name).
 */
export type HookSecret = { code: string } | { link: string; code?: string } | { notice: { event: SecurityEvent; identifier: string } }

/** One message an outside identity system asked us to deliver, read from its hook's payload. */
export type HookMessage = {
  purpose: HookPurpose
  /** A phone message goes out on the first PHONE_CHANNELS channel the fleet has (src/outbox/channel-routing.ts). */
  channel: 'email' | 'phone'
  destination: string
  secret: HookSecret
  /** How long the secret lives, as far as the payload tells (the adapter's default otherwise). */
  ttlSeconds?: number
  /**
   * What makes this message the same message again (its kind, destination and secret): a retry of
   * the hook, whatever delivery id it carries, names the same one. Secret: only its HMAC leaves here.
   */
  sameness: string
  /**
   * When the payload carries nothing that tells this message from the next one of its kind (an
   * account-change notice without its time): the same message again only within this many seconds
   * of arrival, so a retry sends nothing twice and a later one is sent.
   */
  sameWithinSeconds?: number
}

/**
 * What an adapter reads from a payload: the messages to send, or why there are none. A number is
 * read as every number is (libphonenumber, `readPhoneNumber`): one it cannot read is
 * `invalid_destination`, the courier's and the identity flows' answer to it too.
 */
export type HookReading = { messages: HookMessage[] } | { refusal: 'malformed' | 'unsupported_kind' | 'invalid_destination' }

/**
 * The courier idempotency key of a hook message: `<hook>:<HMAC-SHA-256 of its sameness>` under
 * CODE_HASH_KEY, so the key names the message without holding its code, link or destination; with
 * `sameWithinSeconds`, the sameness of the window `receivedAt` falls in.
 */
export function hookIdempotencyKey(hook: string, key: Buffer, message: HookMessage, receivedAt: Date): string {
  const window = message.sameWithinSeconds ? `|${Math.floor(receivedAt.getTime() / (message.sameWithinSeconds * 1000))}` : ''
  return `${hook}:${createHmac('sha256', key).update(`${message.sameness}${window}`).digest('base64url')}`
}
