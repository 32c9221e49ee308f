import { DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET } from '../../config/schema.ts'
import { enqueueChannel, listedPhoneChannels } from '../outbox/channel-routing.ts'
import type { Locale } from '../delivery/locales.ts'
import type { DomainError } from '../identity/errors.ts'
import type { Channel } from '../outbox/constants.ts'
import { acceptCourierMessage, type CourierDeps, type CourierSender } from '../platform/courier.ts'
import { IdempotencyKeyReusedError } from '../platform/idempotency.ts'
import { hookIdempotencyKey, type HookMessage } from './hook-message.ts'
import { KRATOS_CODE_TTL_SECONDS } from './kratos.ts'

/** The three hook routes; the first word names the caller. */
export type HookName = 'supabase-email' | 'supabase-sms' | 'kratos'

/**
 * Each adapter is a courier caller with a fixed scope and limits, defined here and nowhere else.
 * Its id is a `platform.api_keys` row (kind `hook`) the migration 20261202002800_hook_callers made,
 * so its messages are attributed to it as an API key's are; that row is no key and holds no scope
 * or limit (20261206007100): no request authenticates as it, and the console neither lists,
 * rotates nor revokes it. Its per-destination budget counts the exact address the
 * upstream named, far above what the upstream itself sends (docs/hooks.md "Budgets"): the
 * upstream owns its anti-automation, and a stranger who makes it ask for codes for alice+1…alice+20,
 * or for alice twenty times, must not spend alice's own. No hourly volume: COURIER_CAP_SHARE
 * bounds the hooks' share of the fleet's sends. Unlike an API key, an adapter relays its identity
 * system's security notices too.
 */
export const HOOK_CALLERS: Readonly<Record<'supabase' | 'kratos', CourierSender>> = Object.freeze({
  supabase: {
    securityNotices: true,
    apiKeyId: '0193c0de-5ab0-7000-8000-000000000001',
    purposes: ['magic_link', 'verification_code', 'step_up'],
    channels: ['email', 'sms', 'whatsapp'],
    requestsPerMinute: 6_000,
    perDestinationPerHour: DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET,
    perDestinationPerDay: DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET * 10,
    exactDestination: true,
    linkOrigins: [],
  },
  kratos: {
    securityNotices: true,
    apiKeyId: '0193c0de-5ab0-7000-8000-000000000002',
    purposes: ['password_recovery', 'verification_code', 'sign_up', 'magic_link'],
    channels: ['email', 'sms', 'whatsapp'],
    requestsPerMinute: 6_000,
    perDestinationPerHour: DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET,
    perDestinationPerDay: DEFAULT_HOOK_DESTINATION_HOURLY_BUDGET * 10,
    exactDestination: true,
    linkOrigins: [],
  },
})

/**
 * What the deployment's settings give a hook (docs/hooks.md): the origins its links may point at
 * (SUPABASE_LINK_ORIGINS, KRATOS_LINK_ORIGINS: from configuration, never from the payload) and its
 * per-address budget (HOOK_DESTINATION_HOURLY_BUDGET).
 */
export type HookCallerSettings = { linkOrigins?: readonly string[]; perDestinationPerHour?: number }

/** A hook's courier caller under this deployment's settings. */
export function hookCaller(name: 'supabase' | 'kratos', settings: HookCallerSettings = {}): CourierSender {
  const base = HOOK_CALLERS[name]
  const perHour = settings.perDestinationPerHour ?? base.perDestinationPerHour
  return { ...base, linkOrigins: settings.linkOrigins ?? [], perDestinationPerHour: perHour, perDestinationPerDay: perHour * 10 }
}

/**
 * How long a message lives when the payload does not say: Supabase's default OTP expiries (its
 * payload carries none; SUPABASE_EMAIL_OTP_EXPIRY_SECONDS and SUPABASE_SMS_OTP_EXPIRY_SECONDS
 * follow a project's own) and Kratos' default code lifespan.
 */
const DEFAULT_TTL_SECONDS: Readonly<Record<HookName, number>> = Object.freeze({
  'supabase-email': 3_600,
  'supabase-sms': 60,
  kratos: KRATOS_CODE_TTL_SECONDS,
})

/** The courier's dependencies, the locale of every hook message (neither hook tells the recipient's), each hook's settings and the deployment's lifetimes. */
export type HookDeliveryDeps = CourierDeps & {
  defaultLocale: Locale
  /** PHONE_CHANNELS: a phone message goes on the first of them the fleet has, as the identity flows' codes do. */
  phoneChannels?: readonly Channel[]
  hookSettings?: Partial<Record<'supabase' | 'kratos', HookCallerSettings>>
  ttlSeconds?: Partial<Record<HookName, number>>
}

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
  const name = hook === 'kratos' ? 'kratos' : 'supabase'
  const caller = hookCaller(name, deps.hookSettings?.[name])
  const now = deps.clock()
  for (const message of messages) {
    const outcome = await acceptCourierMessage(deps, caller, {
      purpose: message.purpose,
      // The one routing rule: a phone code on the first PHONE_CHANNELS channel the fleet has; none → channel_unavailable.
      channel:
        enqueueChannel(deps, message.channel, caller.channels) ??
        (message.channel === 'email' ? 'email' : listedPhoneChannels(deps.phoneChannels)[0]!),
      destination: message.destination,
      secret: message.secret,
      expiresAt: new Date(now.getTime() + (message.ttlSeconds ?? deps.ttlSeconds?.[hook] ?? DEFAULT_TTL_SECONDS[hook]) * 1000),
      locale: deps.defaultLocale,
      idempotencyKey: hookIdempotencyKey(hook, deps.codeHashKey, message, now),
    })
    if ('refused' in outcome && !(outcome.refused instanceof IdempotencyKeyReusedError)) return { refused: outcome.refused }
  }
  return { accepted: messages.length }
}
