import type { Knex } from 'knex'
import type { Logger } from '../logging/logger.ts'
import type { Channel } from '../outbox/constants.ts'
import { enqueueChannel, type FleetChannels } from '../outbox/channel-routing.ts'
import type { EnqueueDeps } from '../outbox/enqueue.ts'
import type { PhoneNumberPolicy } from '../outbox/phone-numbers.ts'
import { ChannelUnavailableError } from './errors.ts'
import { canonicalDestination, type Identifier } from './identifiers.ts'
import { hitRateLimit, type Limit, type OwnerBudget } from './rate-limits.ts'
import { bucketKeys } from './secrets.ts'

/** What the challenge use cases need; the web builds it once from configuration. */
export type ChallengeDeps = EnqueueDeps & {
  /** CODE_HASH_KEYS' current key: new code hashes and rate-limit hits are written under it. */
  codeHashKey: Buffer
  /** Every CODE_HASH_KEYS key, current first: codes and budgets are checked under all of them. */
  codeHashKeys?: readonly Buffer[]
  challengeTtlSeconds: number
  clock: () => Date
  logger: Logger
  /** Channels the worker fleet can deliver on (src/outbox/channel-directory.ts: what the workers registered). */
  channels: FleetChannels
  /** PHONE_CHANNELS: the phone channels allowed, in fallback order (default: WhatsApp, then SMS); a code goes on the first the fleet has. */
  phoneChannels?: readonly Channel[]
  /** The request's locale (src/http/locale.ts), stored on the message for its template; else `en`. */
  locale?: string
  /** Which phone numbers a code may go to (PHONE_ALLOW_*, SMS_ALLOWED_COUNTRIES); else valid mobiles anywhere. */
  phoneNumbers?: PhoneNumberPolicy
}

/**
 * Resends: one per 30 s, five per challenge. Codes: five per destination (canonical mailbox) an
 * hour. Wrong codes: fifteen a day per identity and purpose, across all its challenges, so guessing
 * is bounded per account and not only per challenge.
 */
export const CHALLENGE_LIMITS = Object.freeze({
  resendIntervalSeconds: 30,
  maxResends: 5,
  codesPerDestinationPerHour: 5,
  wrongCodesPerIdentityPerDay: 15,
})
/** Wrong codes a day per identity and purpose: the signed-in routes' budget and the anonymous routes' ceiling. */
export const WRONG_CODES: Limit = { max: CHALLENGE_LIMITS.wrongCodesPerIdentityPerDay, windowSeconds: 86_400 }

/**
 * Codes to one destination (canonical mailbox) an hour on the anonymous routes (sign-up,
 * recovery): five from one client network, fifteen from all of them, and five more from a client
 * that signed in as the destination's owner before, whatever strangers spent.
 */
export const DESTINATION_BUDGET: OwnerBudget = Object.freeze({
  perClient: { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
  ceiling: { max: 3 * CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
  perDevice: { max: CHALLENGE_LIMITS.codesPerDestinationPerHour, windowSeconds: 3_600 },
})

/**
 * Wrong codes a day on the anonymous routes (recovery, sign-up confirmation): five from one client
 * network, fifteen from all of them (the account's bound on guessing), and fifteen of its own for
 * a client that signed in as the account before.
 */
export const WRONG_CODE_BUDGET: OwnerBudget = Object.freeze({
  perClient: { max: 5, windowSeconds: 86_400 },
  ceiling: WRONG_CODES,
  perDevice: WRONG_CODES,
})

/** When a challenge issued at `now` stops verifying. */
export function challengeExpiry(deps: Pick<ChallengeDeps, 'challengeTtlSeconds'>, now: Date): Date {
  return new Date(now.getTime() + deps.challengeTtlSeconds * 1000)
}

/**
 * The channel a code for this identifier is enqueued on (src/outbox/channel-routing.ts, the one
 * rule): email, or the first phone channel of PHONE_CHANNELS the worker fleet has; the worker may
 * carry it on over the later ones. Undefined when none is on offer. The same for every identifier
 * of a kind, account or not.
 */
export function deliveryChannelFor(deps: Pick<ChallengeDeps, 'channels' | 'phoneChannels'>, identifier: Identifier): Channel | undefined {
  return enqueueChannel(deps, identifier.kind)
}

/** A code for a channel nobody offers (no phone channel listed and registered) is refused up front, never enqueued. */
export function assertChannelAvailable(deps: Pick<ChallengeDeps, 'channels' | 'phoneChannels'>, identifier: Identifier): Channel {
  const channel = deliveryChannelFor(deps, identifier)
  if (channel === undefined) throw new ChannelUnavailableError()
  return channel
}

/** Counts one request of a signed-in identity against an hourly allowance (pumping from one session). */
export async function limitIdentityTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>,
  action: string,
  identityId: string,
  perHour: number,
  now: Date,
): Promise<void> {
  await hitRateLimit(
    trx,
    bucketKeys(deps, `identity:${action}`, identityId),
    { max: perHour, windowSeconds: 3_600 },
    now,
    'identity_rate_limited',
  )
}

/**
 * The destination's bucket: the canonical mailbox, so `+tag` variants share it. Invitations spend
 * it too (src/organization/invitations.ts), under DESTINATION_BUDGET's ceiling.
 */
export const destinationBucket = (deps: Pick<ChallengeDeps, 'codeHashKey' | 'codeHashKeys'>, identifier: Identifier) =>
  bucketKeys(deps, `destination:${identifier.kind}`, canonicalDestination(identifier))
