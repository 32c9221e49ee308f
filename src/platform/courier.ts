import { createHmac } from 'node:crypto'
import type { Knex } from 'knex'
import { linkOriginAllowed } from '../../config/link-origins.ts'
import {
  ChannelUnavailableError,
  ForbiddenError,
  RateLimitedError,
  UnprocessableError,
  UpgradeInProgressError,
  type DomainError,
} from '../identity/errors.ts'
import { parseIdentifier, phoneRefusal } from '../identity/identifiers.ts'
import { spendTiersTx, tiersWait, type Tier } from '../identity/rate-limits.ts'
import { bucketKeys } from '../identity/secrets.ts'
import { securityNoticeBody, type SecurityEvent } from '../identity/security-notices.ts'
import type { Channel, Purpose } from '../outbox/constants.ts'
import { COURIER_ONLY_PURPOSES, encodeCourierBody } from '../outbox/courier-body.ts'
import { courierMessageOfKey } from '../outbox/courier-functions-sql.ts'
import { carriersOf, offersChannel, type FleetChannels } from '../outbox/channel-routing.ts'
import { canonicalDestination, PHONE_CHANNELS } from '../outbox/destination.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import { DEFAULT_PHONE_NUMBER_POLICY, type PhoneNumberPolicy } from '../outbox/phone-numbers.ts'
import type { CourierCaller, CourierPurpose } from './api-keys.ts'
import { spendApiKeyHourTx, spendApiKeyRequest } from './api-keys-sql.ts'
import { IdempotencyKeyInUseError, IdempotencyKeyReusedError, useIdempotencyKeyTx } from './idempotency.ts'

/** What the courier core needs: the enqueue's, the clock, the fleet's channels and PHONE_CHANNELS, every CODE_HASH_KEYS key. */
export type CourierDeps = EnqueueDeps & {
  db: Knex
  clock: () => Date
  channels: FleetChannels
  phoneChannels?: readonly Channel[]
  codeHashKeys?: readonly Buffer[]
  /** Which numbers a code may go to at all (docs/delivery.md "Phone numbers"): the identity flows' rule, here too. */
  phoneNumbers?: PhoneNumberPolicy
  /**
   * Whether every live worker renders a purpose (the web's format negotiation, docs/upgrading.md
   * "Format negotiation"); unset: every purpose is accepted.
   */
  renderedPurpose?: (purpose: Purpose) => boolean
}

/** How long a caller waits before trying a purpose an older live worker cannot render: two censuses. */
const UPGRADE_RETRY_AFTER_SECONDS = 10

/**
 * A courier caller; a hook adapter (src/hooks/hook-delivery.ts) may also relay its identity
 * system's security notices, which no API key can send.
 */
export type CourierSender = CourierCaller & { securityNotices?: true }

/** One message to deliver, as the courier API or a hook adapter hands it over. */
export type CourierInput = {
  purpose: CourierPurpose | 'security_notice'
  channel: Channel
  destination: string
  /** A code; a link, with the code that does the same beside it if the caller has one; a notice (no secret). */
  secret: { code: string } | { link: string; code?: string } | { notice: { event: SecurityEvent; identifier: string } }
  expiresAt: Date
  /** A shipped locale, resolved by the caller (the request's, else the deployment's default). */
  locale: string
  /**
   * A display name for the caller's product, already held to the organization-name rule by the
   * entry point (src/http/routes/courier.ts); the worker holds it to the rule again before rendering.
   */
  appName?: string
  idempotencyKey: string
}

/** Accepted (or the first answer again, for a repeated idempotency key), or refused with a domain error. */
export type CourierOutcome = { messageId: string; replayed: boolean } | { refused: DomainError }

/** A courier message lives at most this long: a code or link older than a day is not a security message. */
export const MAX_COURIER_LIFETIME_SECONDS = 86_400
const MAX_LINK_LENGTH = 2_048
const IDEMPOTENCY_SCOPE = 'courier.message'

/**
 * The courier's one entry (`POST /v1/messages` and, later, the hook adapters): checks the caller's
 * scope and limits and the message's rules, then writes the message, its sealed secret and its job
 * in one transaction with the idempotency key. The secret is sealed there and never stored,
 * logged or returned; the request is remembered by an HMAC, not by its body.
 */
export async function acceptCourierMessage(deps: CourierDeps, caller: CourierSender, input: CourierInput): Promise<CourierOutcome> {
  const now = deps.clock()
  const refusal = refusalOf(deps, caller, input, now)
  if (refusal) return { refused: refusal }
  const destination = parseIdentifier(input.destination)!.value
  try {
    const keyWait = await spendApiKeyRequest(deps.db, caller.apiKeyId, now, caller.requestsPerMinute)
    if (keyWait !== undefined) return { refused: new RateLimitedError(keyWait, 'rate_limited') }
    return await deps.db.transaction(async (trx) => {
      const key = { identityId: caller.apiKeyId, scope: IDEMPOTENCY_SCOPE, key: input.idempotencyKey }
      const requestHash = requestHashOf(deps.codeHashKey, { ...input, destination })
      const { claim, remember } = await useIdempotencyKeyTx<{ messageId: string }>(trx, key, requestHash, now)
      if (!claim.claimed) return { messageId: claim.response.messageId, replayed: true }
      const tiers = destinationTiers(deps, caller, input.channel, destination)
      const wait = await tiersWait(trx, tiers, now)
      // Thrown, not returned: the key's claim rolls back with it, so a retry after the wait is sent.
      if (wait !== undefined) throw new RateLimitedError(wait, 'destination_budget_exhausted')
      // A new address for the key's hourly count: none sent to within the hour (asked before this send counts).
      const newDestination = (await tiersWait(trx, [{ ...tiers[0]!, limit: { max: 1, windowSeconds: 3_600 } }], now)) === undefined
      await spendTiersTx(trx, tiers, now)
      const { messageId } = await enqueueSecurityMessageTx(
        trx,
        deps,
        {
          purpose: input.purpose,
          channel: input.channel,
          destination,
          locale: input.locale,
          expiresAt: input.expiresAt,
          apiKeyId: caller.apiKeyId,
          ...carriersFor(caller, input.channel),
        },
        secretBytes(input, now),
      )
      await spendKeyHourTx(trx, caller, now, newDestination)
      await remember({ messageId })
      return { messageId, replayed: false }
    })
  } catch (error) {
    if (error instanceof RateLimitedError || error instanceof IdempotencyKeyReusedError || error instanceof IdempotencyKeyInUseError)
      return { refused: error }
    throw error
  }
}

/** A key scoped to some phone channels binds the worker's fallback too (src/outbox/channel-routing.ts): its message carries them. */
function carriersFor(caller: CourierCaller, channel: Channel): { carriers?: Channel[] } {
  const carriers = PHONE_CHANNELS.has(channel) ? carriersOf(caller.channels) : undefined
  return carriers ? { carriers } : {}
}

/**
 * The per-destination budgets of a caller: a key's count the canonical mailbox or number (`+tag`
 * variants buy no extra codes); a hook's count the exact address its upstream named
 * (`exactDestination`, docs/hooks.md "Budgets").
 */
function destinationTiers(deps: CourierDeps, caller: CourierCaller, channel: Channel, destination: string): Tier[] {
  const owner = `${caller.apiKeyId}:${caller.exactDestination ? destination : canonicalDestination(channel, destination)}`
  return [
    { bucket: bucketKeys(deps, 'courier-destination-hour', owner), limit: { max: caller.perDestinationPerHour, windowSeconds: 3_600 } },
    { bucket: bucketKeys(deps, 'courier-destination-day', owner), limit: { max: caller.perDestinationPerDay, windowSeconds: 86_400 } },
  ]
}

/**
 * A key's send this clock hour against its hourly volume and its new addresses (docs/courier.md
 * "Keys"): past either, the request is refused 429 `api_key_budget_exhausted` until the hour ends.
 * Last in the transaction, so the key's counter row is held only to the commit.
 */
async function spendKeyHourTx(trx: Knex.Transaction, caller: CourierCaller, now: Date, newDestination: boolean): Promise<void> {
  if (caller.sendsPerHour === undefined || caller.destinationsPerHour === undefined) return
  const budget = { sendsPerHour: caller.sendsPerHour, destinationsPerHour: caller.destinationsPerHour, newDestination }
  const wait = await spendApiKeyHourTx(trx, caller.apiKeyId, now, budget)
  if (wait !== undefined) throw new RateLimitedError(wait, 'api_key_budget_exhausted')
}

/** The rules a message must meet before anything is written; undefined when it meets them all. */
function refusalOf(deps: CourierDeps, caller: CourierSender, input: CourierInput, now: Date): DomainError | undefined {
  const mayPurpose = input.purpose === 'security_notice' ? caller.securityNotices === true : caller.purposes.includes(input.purpose)
  if (!mayPurpose || !caller.channels.includes(input.channel))
    return new ForbiddenError('api_key_scope', 'This API key may not send this purpose on this channel.')
  const identifier = parseIdentifier(input.destination)
  if (!identifier || (identifier.kind === 'phone') !== PHONE_CHANNELS.has(input.channel))
    return new UnprocessableError(
      'invalid_destination',
      'The destination is not an address of this channel (email, or E.164 for a phone channel).',
    )
  // The numbers the identity flows refuse are refused here too (premium-rate, toll-free, invalid…), and
  // an SMS to a country outside SMS_ALLOWED_COUNTRIES: a caller's user must not pump through us.
  if (phoneRefusal(identifier, deps.phoneNumbers ?? DEFAULT_PHONE_NUMBER_POLICY, { has: (channel) => channel === input.channel }))
    return new UnprocessableError('unsupported_phone_number', 'This number cannot receive codes on this channel.')
  const carries = 'link' in input.secret ? 'magic_link' : 'notice' in input.secret ? 'security_notice' : 'code'
  if (carries !== (input.purpose === 'magic_link' || input.purpose === 'security_notice' ? input.purpose : 'code'))
    return new UnprocessableError('invalid_secret', 'A magic_link carries {link}; every other purpose carries {code}.')
  if ('link' in input.secret && !isAcceptableLink(input.secret.link))
    return new UnprocessableError('invalid_link', `The link must be an absolute https URL of at most ${MAX_LINK_LENGTH} characters.`)
  // Exactly one of the caller's configured origins (config/link-origins.ts): another host, port or an IDN look-alike is refused.
  if ('link' in input.secret && !linkOriginAllowed(input.secret.link, caller.linkOrigins))
    return new UnprocessableError('link_origin_not_allowed', 'The link must point at an origin allowed for this caller.')
  const lifetime = (input.expiresAt.getTime() - now.getTime()) / 1000
  if (!(lifetime > 0 && lifetime <= MAX_COURIER_LIFETIME_SECONDS))
    return new UnprocessableError('invalid_expiry', 'expiresAt must be in the future and at most 24 hours away.')
  if (input.appName !== undefined && !COURIER_ONLY_PURPOSES.has(input.purpose))
    return new UnprocessableError('invalid_data', 'data.appName is only for verification_code and magic_link.')
  // PHONE_CHANNELS is an allow-list: an unlisted phone channel is refused like one no worker has.
  if (!offersChannel(deps, input.channel)) return new ChannelUnavailableError()
  // Last: every rule above is the caller's to fix; this one passes once the older workers have stopped.
  if (deps.renderedPurpose && !deps.renderedPurpose(input.purpose)) return new UpgradeInProgressError(UPGRADE_RETRY_AFTER_SECONDS)
  return undefined
}

// https only, no credentials in it, nothing a template or a mail client could read as a line or markup.
function isAcceptableLink(link: string): boolean {
  if (link.length > MAX_LINK_LENGTH || /[\s<>"'`\p{Cc}\p{Cf}]/u.test(link)) return false
  try {
    const url = new URL(link)
    return url.protocol === 'https:' && url.username === '' && url.password === '' && url.hostname !== ''
  } catch {
    return false
  }
}

function secretBytes(input: CourierInput, now: Date): Buffer {
  const { secret } = input
  if ('notice' in secret) return securityNoticeBody(secret.notice.event, now, secret.notice.identifier)
  if (!COURIER_ONLY_PURPOSES.has(input.purpose)) return Buffer.from((secret as { code: string }).code, 'utf8')
  const named = input.appName === undefined ? {} : { appName: input.appName }
  if (!('link' in secret)) return encodeCourierBody({ code: secret.code, ...named })
  // Sealed as a browser reads it (WHATWG URL), the reading its origin was allowed on: no spelling
  // goes out that another parser reads as another host (`https://app.example\@evil.example/`).
  const link = new URL(secret.link).href
  return encodeCourierBody({ link, ...(secret.code === undefined ? {} : { otp: secret.code }), ...named })
}

/** The request an idempotency key was used for, keyed: the table never holds something a code can be guessed from. */
function requestHashOf(key: Buffer, input: CourierInput): Buffer {
  const canonical = JSON.stringify([
    input.purpose,
    input.channel,
    input.destination,
    input.secret,
    input.expiresAt.toISOString(),
    input.locale,
    input.appName,
  ])
  return createHmac('sha256', key).update(`courier-request:${canonical}`).digest()
}

const iso = (text: string | null): string | null => (text === null ? null : new Date(text).toISOString())

/** `GET /v1/messages/{id}`: the message's state and attempts, to the key that sent it only (any other: undefined, as for none). */
export async function courierMessage(db: Knex, caller: Pick<CourierCaller, 'apiKeyId'>, messageId: string) {
  const message = await courierMessageOfKey(db, caller.apiKeyId, messageId)
  if (!message) return undefined
  return {
    ...message,
    createdAt: iso(message.createdAt)!,
    expiresAt: iso(message.expiresAt)!,
    publishedAt: iso(message.publishedAt),
    deadLetteredAt: iso(message.deadLetteredAt),
    attempts: message.attempts.map((attempt) => ({ ...attempt, attemptedAt: iso(attempt.attemptedAt)! })),
  }
}
