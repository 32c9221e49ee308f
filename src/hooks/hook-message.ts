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
}

/** What an adapter reads from a payload: the messages to send, or why there are none. */
export type HookReading = { messages: HookMessage[] } | { refusal: 'malformed' | 'unsupported_kind' }

/**
 * The courier idempotency key of a hook message: `<hook>:<HMAC-SHA-256 of its sameness>` under
 * CODE_HASH_KEY, so the key names the message without holding its code, link or destination.
 */
export function hookIdempotencyKey(hook: string, key: Buffer, message: HookMessage): string {
  return `${hook}:${createHmac('sha256', key).update(message.sameness).digest('base64url')}`
}
