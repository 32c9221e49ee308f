import { unknownEnvelopeVersion } from '../src/crypto/envelope.ts'
import { unreachableChannels } from '../src/outbox/attempts-sql.ts'
import { carryingChannels } from '../src/outbox/channel-routing.ts'
import type { Claim } from '../src/outbox/claim.ts'
import type { Channel } from '../src/outbox/constants.ts'
import type { MessageRow } from '../src/outbox/messages-sql.ts'
import { defaultHealthPolicy, type HealthPolicy, type ProviderHealth } from '../src/outbox/provider-health.ts'
import { routeFor, type Route } from '../src/outbox/provider-route.ts'
import { providerStates, takeProbeLease } from '../src/outbox/provider-states-sql.ts'
import { smsCountryRefused } from '../src/outbox/send-caps.ts'
import type { Provider } from '../src/providers/provider.ts'
import type { DeliveryDeps } from './delivery-deps.ts'

/** What routing reads of a message: its own channel and the phone channels its sender allowed. */
type Routed = Pick<MessageRow, 'channel' | 'carriers'>
type RouteDeps = Pick<DeliveryDeps, 'providers' | 'phoneChannels'>

/**
 * The channels a message may go out on, in order (src/outbox/channel-routing.ts, the one rule:
 * PHONE_CHANNELS as an allow-list, the message's `carriers`), less those it proved `unreachable`.
 */
export function routeChannels(deps: Pick<DeliveryDeps, 'phoneChannels'>, message: Routed, unreachable?: ReadonlySet<Channel>): Channel[] {
  return carryingChannels(deps.phoneChannels, message, unreachable)
}

/** A message's providers in failover order across its route's channels; none when this worker has no provider for any. */
export function providersFor(deps: RouteDeps, message: Routed, unreachable?: ReadonlySet<Channel>): readonly Provider[] {
  return routeChannels(deps, message, unreachable).flatMap((candidate) => deps.providers[candidate] ?? [])
}

/** The channel of a message's route that this worker has the provider under. */
export function channelOfProvider(deps: RouteDeps, message: Routed, providerId: string): Channel | undefined {
  return routeChannels(deps, message).find((candidate) => (deps.providers[candidate] ?? []).some((provider) => provider.id === providerId))
}

/** The channel a routed send goes out on (a phone message may go by SMS); undefined when not sent now. */
export function routedChannel(deps: RouteDeps, message: Routed, route: Route | undefined): Channel | undefined {
  return route?.kind === 'send' ? channelOfProvider(deps, message, route.provider) : undefined
}

/** Whether the message's route has a later channel with a provider here after `sendsOn`: where a channel_unreachable answer goes on to. */
export function channelLeftAfter(
  deps: RouteDeps,
  message: Routed,
  unreachable: ReadonlySet<Channel> | undefined,
  sendsOn: Channel | undefined,
): boolean {
  const channels = routeChannels(deps, message, unreachable)
  if (sendsOn === undefined || !channels.includes(sendsOn)) return false
  return channels.slice(channels.indexOf(sendsOn) + 1).some((later) => (deps.providers[later] ?? []).length > 0)
}

/** Whether this worker has a provider for the message: the one place the delivery step asks. */
export function hasProvider(deps: RouteDeps, message: Routed): boolean {
  return providersFor(deps, message).length > 0
}

/** Whether this worker would attempt the claimed message at all: it has a provider and opens its envelope's version. */
export function canAttempt(deps: RouteDeps, claim: Extract<Claim, { kind: 'claimed' }>): boolean {
  return hasProvider(deps, claim.message) && unknownEnvelopeVersion(claim.envelope) === undefined
}

type RoutingDeps = Pick<DeliveryDeps, 'db' | 'providers' | 'phoneChannels' | 'clock' | 'logger' | 'settings' | 'sendCaps'>

/**
 * Where each claimed message's attempt goes (src/outbox/provider-route.ts `routeFor`): the fleet's
 * provider states and pauses are read once per batch; the probe of a provider held down is sent only
 * by the worker that wins its lease (one per provider, fleet-wide), as up to `halfOpenProbes`
 * messages of its batch; every other message whose providers are all held or paused waits
 * without spending an attempt. `skip`: messages that will not be sent anyway (suppressed).
 */
export async function routeClaims(
  deps: RoutingDeps,
  claims: readonly (Claim | { kind: 'failed' })[],
  skip: (messageId: string) => boolean,
  /** Told the providers' states, as this batch read them. */
  seen?: (states: ReadonlyMap<string, ProviderHealth>) => void,
): Promise<Map<string, Route>> {
  const routes = new Map<string, Route>()
  const messages = claims.flatMap((claim) =>
    claim.kind === 'claimed' &&
    !skip(claim.message.id) &&
    canAttempt(deps, claim) &&
    !smsCountryRefused(deps.sendCaps, claim.message.channel, claim.message.destination)
      ? [claim.message]
      : [],
  )
  if (messages.length === 0) return routes
  const now = deps.clock()
  const policy = deps.settings.providerHealth ?? defaultHealthPolicy()
  const states = await providerStates(deps.db, now)
  seen?.(states)
  // The channels a phone message already proved unable to reach its number (only one that had an attempt can have).
  const unreachable = await unreachableChannels(
    deps.db,
    messages.filter((message) => message.attempt_count > 0 && routeChannels(deps, message).length > 1).map((message) => message.id),
  )
  const probes = probeLeases(deps, states, now, policy)
  for (const message of messages)
    routes.set(message.id, await routeOne(deps, message, unreachable.get(message.id), { states, probes, now, policy }))
  return routes
}

/** One message's route, its probe lease taken (or the message routed again without that probe). */
async function routeOne(
  deps: RoutingDeps,
  message: MessageRow,
  proven: ReadonlySet<Channel> | undefined,
  batch: { states: Map<string, ProviderHealth>; probes: ReturnType<typeof probeLeases>; now: Date; policy: HealthPolicy },
): Promise<Route> {
  // SMS is never a fallback to a number outside SMS_ALLOWED_COUNTRIES: the route leaves it out.
  const barred = message.channel === 'whatsapp' && smsCountryRefused(deps.sendCaps, 'sms', message.destination)
  const left = barred ? new Set<Channel>([...(proven ?? []), 'sms']) : proven
  // With every channel of its route unreachable (the fleet's phone channels changed meanwhile), its own route answers.
  const channels = left && providersFor(deps, message, left).length > 0 ? left : undefined
  const chain = providersFor(deps, message, channels).map((provider) => provider.id)
  let route = routeFor(chain, message.attempt_count, batch.states, message, batch.now, batch.policy)
  while (route.kind === 'send' && route.probe && !(await batch.probes.take(route.provider, message.id)))
    route = routeFor(chain, message.attempt_count, batch.states, message, batch.now, batch.policy)
  if (route.kind === 'send' && channelLeftAfter(deps, message, channels, routedChannel(deps, message, route)))
    route = { ...route, fallbackLeft: true }
  return route
}

/**
 * The probe leases of one batch: the first message offered as a provider's probe takes its lease;
 * if won, the next `halfOpenProbes − 1` of the batch go as probes under it too. Once a provider's
 * lease is lost or used up, the batch's view of it shows a probe in flight, so routing holds the
 * rest (or sends them to another provider of their chain).
 */
function probeLeases(
  deps: Pick<DeliveryDeps, 'db' | 'logger' | 'settings'>,
  states: Map<string, ProviderHealth>,
  now: Date,
  policy: HealthPolicy,
) {
  const left = new Map<string, number>()
  const until = new Date(now.getTime() + deps.settings.sendTimeoutMs + 5_000)
  return {
    async take(provider: string, messageId: string): Promise<boolean> {
      if (!left.has(provider)) {
        const won = await takeProbeLease(deps.db, provider, until, now)
        left.set(provider, won ? Math.max(1, policy.halfOpenProbes) : 0)
        if (won) deps.logger.info('provider probe: a few messages test whether a provider held down is back', { provider, messageId })
      }
      const remaining = left.get(provider)!
      if (remaining > 0) left.set(provider, remaining - 1)
      // Used up (or lost): a probe is in flight for the rest of this batch.
      if (remaining <= 1) states.set(provider, { ...states.get(provider)!, probeUntil: until })
      return remaining > 0
    },
  }
}
