import type { Claim, ClaimRequest } from '../src/outbox/claim.ts'
import { unknownEnvelopeVersion } from '../src/crypto/envelope.ts'
import type { Provider } from '../src/providers/provider.ts'
import type { Channel } from '../src/outbox/constants.ts'
import { PHONE_CHANNEL_ORDER, PHONE_CHANNELS } from '../src/outbox/destination.ts'
import type { Route } from '../src/outbox/provider-health.ts'
import type { DeliveryFailureError } from '../src/providers/provider.ts'
import type { Outcome, Sent } from '../src/outbox/record.ts'
import type { DeliveryDeps, PendingRecord } from './deliver.ts'

/**
 * Which claimed messages this worker sends now, and the deferrals of those it does not: no
 * provider here, an envelope version it does not open, a send cap, a pause or an outage hold.
 * Each is recorded without spending an attempt.
 */

/**
 * The channels a message may go out on, in order (docs/delivery.md "Phone channels"): its own,
 * then, for a phone message, the phone channels after it in PHONE_CHANNELS order — never email,
 * never one that came before it — less those it proved `unreachable` for this recipient. The
 * envelope still binds the message's own channel and destination: only the carrier changes.
 */
export function routeChannels(
  deps: Pick<DeliveryDeps, 'phoneChannels'>,
  channel: Channel,
  unreachable: ReadonlySet<Channel> = new Set(),
): Channel[] {
  if (!PHONE_CHANNELS.has(channel)) return [channel]
  const order = deps.phoneChannels ?? PHONE_CHANNEL_ORDER
  const at = order.indexOf(channel)
  const next = at >= 0 ? order.slice(at + 1) : order.filter((other) => other !== channel)
  return [channel, ...next].filter((candidate) => !unreachable.has(candidate))
}

/** A message's providers in failover order across its route's channels; none when this worker has no provider for any. */
export function providersFor(
  deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>,
  channel: Channel,
  unreachable?: ReadonlySet<Channel>,
): readonly Provider[] {
  return routeChannels(deps, channel, unreachable).flatMap((candidate) => deps.providers[candidate] ?? [])
}

/** The channel of a message's route (`channel`: its own) that this worker has the provider under. */
export function channelOfProvider(
  deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>,
  channel: Channel,
  providerId: string,
): Channel | undefined {
  return routeChannels(deps, channel).find((candidate) => (deps.providers[candidate] ?? []).some((provider) => provider.id === providerId))
}

/** The channel a routed send goes out on (a phone message may go by SMS); undefined when not sent now. */
export function routedChannel(
  deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>,
  channel: Channel,
  route: Route | undefined,
): Channel | undefined {
  return route?.kind === 'send' ? channelOfProvider(deps, channel, route.provider) : undefined
}

/** Whether the message's route has a later channel with a provider here after `sendsOn`: where a channel_unreachable answer goes on to. */
export function channelLeftAfter(
  deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>,
  channel: Channel,
  unreachable: ReadonlySet<Channel> | undefined,
  sendsOn: Channel | undefined,
): boolean {
  const channels = routeChannels(deps, channel, unreachable)
  if (sendsOn === undefined || !channels.includes(sendsOn)) return false
  return channels.slice(channels.indexOf(sendsOn) + 1).some((later) => (deps.providers[later] ?? []).length > 0)
}

/** Whether this worker has a provider for a message of the channel: the one place the delivery step asks. */
export function hasProvider(deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>, channel: Channel): boolean {
  return providersFor(deps, channel).length > 0
}

/** Whether this worker would attempt the claimed message at all: it has a provider and opens its envelope's version. */
export function canAttempt(deps: Pick<DeliveryDeps, 'providers' | 'phoneChannels'>, claim: Extract<Claim, { kind: 'claimed' }>): boolean {
  return hasProvider(deps, claim.message.channel) && unknownEnvelopeVersion(claim.envelope) === undefined
}

/** How long a message whose channel has no provider here waits before a worker claims it again. */
export const WITHOUT_PROVIDER_WAIT_MS = 60_000

/** When each worker (its providers object) last logged each put-back line, per line and key. */
const putBackLogged = new WeakMap<object, Map<string, number>>()

/**
 * Defers a claimed message this worker cannot attempt for a minute, no attempt spent, nothing
 * opened: another worker may take it meanwhile, and expiry still wins (the record step
 * dead-letters a deferral past it). Its line is logged at most once per key and minute per worker.
 */
function putBack(
  deps: DeliveryDeps,
  request: ClaimRequest,
  claim: Extract<Claim, { kind: 'claimed' }>,
  line: { key: string; message: string; fields: Record<string, string> },
): PendingRecord {
  const now = deps.clock().getTime()
  const logged = putBackLogged.get(deps.providers) ?? new Map<string, number>()
  putBackLogged.set(deps.providers, logged)
  const last = logged.get(line.key)
  if (last === undefined || now - last >= WITHOUT_PROVIDER_WAIT_MS || now < last) {
    logged.set(line.key, now)
    deps.logger.error(line.message, { ...line.fields, messageId: request.messageId })
  }
  return deferClaimed(request, claim, new Date(now + WITHOUT_PROVIDER_WAIT_MS))
}

/**
 * A claimed message no provider of this worker can send (docs/delivery.md "Channels"), put back
 * with the channel and a message id in its MISCONFIGURATION line; every such message is counted.
 */
export function withoutProvider(deps: DeliveryDeps, request: ClaimRequest, claim: Extract<Claim, { kind: 'claimed' }>): PendingRecord {
  const { channel } = claim.message
  deps.metrics?.withoutProvider(channel)
  return putBack(deps, request, claim, {
    key: `channel:${channel}`,
    message: 'MISCONFIGURATION: no provider for this channel in this worker; the message waits without spending an attempt',
    fields: { channel },
  })
}

/**
 * A claimed message sealed in an envelope version this release does not open (docs/upgrading.md
 * "Format negotiation"): a newer release's web wrote it, so a newer worker can send it. Put back,
 * never dead-lettered for it; the line names the format and a message id, never the envelope;
 * every such message is counted.
 */
export function unreadableFormat(
  deps: DeliveryDeps,
  request: ClaimRequest,
  claim: Extract<Claim, { kind: 'claimed' }>,
  format: string,
): PendingRecord {
  deps.metrics?.unreadableFormat(format)
  return putBack(deps, request, claim, {
    key: `format:${format}`,
    message:
      'MISCONFIGURATION: a message is sealed in an envelope version this worker does not open; it waits for a newer worker without spending an attempt',
    fields: { format },
  })
}

/**
 * A claimed message not sent: its channel was paused meanwhile, or (`until`) a send cap holds it
 * to the end of the hour, this worker has no provider for its channel, or (`heldFor`) every
 * provider of its channel is held down. Recorded as deferred, no attempt spent.
 */
export function deferClaimed(
  request: ClaimRequest,
  claim: Extract<Claim, { kind: 'claimed' }>,
  until?: Date,
  heldFor?: readonly string[],
): PendingRecord {
  const { message } = claim
  return {
    messageId: request.messageId,
    lease: request.lease,
    outcome: { kind: 'deferred', ...(until ? { until } : {}), ...(heldFor ? { heldFor } : {}) },
    context: { messageId: request.messageId, purpose: message.purpose, channel: message.channel },
  }
}

/**
 * The provider refused us, not the message (an expired token, a missing template): no attempt is
 * spent; the record step holds the provider down fleet-wide at once, so the message's next claim
 * fails over to its route's next provider or waits for the probe like any held message.
 */
export function heldAsMisconfigured(
  deps: Pick<DeliveryDeps, 'logger' | 'metrics'>,
  sent: Sent,
  failure: DeliveryFailureError,
  context: Record<string, unknown>,
): Outcome {
  deps.logger.error(
    'MISCONFIGURATION: the provider refused our credentials or settings; it is held down and the message waits or fails over without spending an attempt',
    {
      ...context,
      provider: sent.id,
      channel: sent.channel,
      providerCode: failure.providerCode,
    },
  )
  deps.metrics?.providerMisconfigured(sent.id)
  return { kind: 'deferred', misconfigured: sent }
}
