import type { Locale } from '../delivery/locales.ts'
import type { DomainError } from '../identity/errors.ts'
import type { CourierCaller } from '../platform/api-keys.ts'
import { acceptCourierMessage, type CourierDeps } from '../platform/courier.ts'
import { IdempotencyKeyReusedError } from '../platform/idempotency.ts'
import { hookIdempotencyKey, type HookMessage } from './hook-message.ts'

/** The three hook routes; the first word names the caller. */
export type HookName = 'supabase-email' | 'supabase-sms' | 'kratos'

/**
 * Each adapter is a courier caller with a fixed scope and limits. Its id is an `platform.api_keys`
 * row the migration 20261202002800_hook_callers made, so its messages are attributed to it as an
 * API key's are; that row's secret hash has no known preimage, so no request can present it.
 */
export const HOOK_CALLERS: Readonly<Record<'supabase' | 'kratos', CourierCaller>> = Object.freeze({
  supabase: {
    apiKeyId: '0193c0de-5ab0-7000-8000-000000000001',
    purposes: ['magic_link', 'verification_code', 'step_up'],
    channels: ['email', 'sms', 'whatsapp'],
    requestsPerMinute: 6_000,
    perDestinationPerHour: 20,
    perDestinationPerDay: 100,
  },
  kratos: {
    apiKeyId: '0193c0de-5ab0-7000-8000-000000000002',
    purposes: ['password_recovery', 'verification_code', 'sign_up', 'magic_link'],
    channels: ['email', 'sms', 'whatsapp'],
    requestsPerMinute: 6_000,
    perDestinationPerHour: 20,
    perDestinationPerDay: 100,
  },
})

/**
 * How long a message lives when the payload does not say: Supabase's default OTP expiry (1 hour;
 * its payload carries none) and Kratos' default code lifespan (15 minutes).
 */
const DEFAULT_TTL_SECONDS: Readonly<Record<HookName, number>> = Object.freeze({
  'supabase-email': 3_600,
  'supabase-sms': 3_600,
  kratos: 900,
})

/** The courier's dependencies, and the locale of every hook message (neither hook tells the recipient's). */
export type HookDeliveryDeps = CourierDeps & { defaultLocale: Locale }

/** Every message committed (or found committed by an earlier delivery of the same hook call), or the first refusal. */
export type HookAcceptance = { accepted: number } | { refused: DomainError }

/**
 * Hands each message of one hook call to the courier core, one transaction each, under an
 * idempotency key derived from the message itself (hook-message.ts): a retry of the call, which
 * Supabase sends with a new `webhook-id` and Kratos after any non-2xx, finds its messages
 * committed and sends nothing twice. A retry computes a later expiry, which the courier sees as
 * another request under the same key (`idempotency_key_reused`); for a hook that can only be the same message again.
 * Two messages (a secure email change) are two commits: a refusal of the second leaves the first
 * committed, and the hook's retry completes the pair without sending the first twice.
 */
export async function acceptHookMessages(
  deps: HookDeliveryDeps,
  hook: HookName,
  messages: readonly HookMessage[],
): Promise<HookAcceptance> {
  const caller = HOOK_CALLERS[hook === 'kratos' ? 'kratos' : 'supabase']
  const now = deps.clock()
  for (const message of messages) {
    const outcome = await acceptCourierMessage(deps, caller, {
      purpose: message.purpose,
      channel: message.channel === 'email' ? 'email' : deps.channels.has('sms') ? 'sms' : 'whatsapp',
      destination: message.destination,
      secret: message.secret,
      expiresAt: new Date(now.getTime() + (message.ttlSeconds ?? DEFAULT_TTL_SECONDS[hook]) * 1000),
      locale: deps.defaultLocale,
      idempotencyKey: hookIdempotencyKey(hook, deps.codeHashKey, message),
    })
    if ('refused' in outcome && !(outcome.refused instanceof IdempotencyKeyReusedError)) return { refused: outcome.refused }
  }
  return { accepted: messages.length }
}
