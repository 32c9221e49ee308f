import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import {
  canAttempt,
  channelLeftAfter,
  channelOfProvider,
  hasProvider,
  providersFor,
  routeChannels,
  heldAsMisconfigured,
  routedChannel,
  unreadableFormat,
  withoutProvider,
} from './deliver-holds.ts'
import { envelopeContext, open, unknownEnvelopeVersion } from '../src/crypto/envelope.ts'
import type { KeyRing } from '../src/crypto/key-ring.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { composeMessage, defaultTemplates, UnreadableBodyError } from '../src/delivery/compose.ts'
import type { Templates } from '../src/delivery/templates.ts'
import { suppressedAmong } from '../src/outbox/delivery-events-sql.ts'
import { unreachableChannels } from '../src/outbox/attempts-sql.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import type { Claim, ClaimRequest } from '../src/outbox/claim.ts'
import type { WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import type { Channel, DeliveryJobData } from '../src/outbox/constants.ts'
import type { Outcome, RecordRequest, Recorded } from '../src/outbox/record.ts'
import type { RetrySettings } from '../src/outbox/retry-policy.ts'
import { smsCountryRefused, type SendCaps } from '../src/outbox/send-caps.ts'
import { defaultHealthPolicy, routeFor, type ProviderHealth, type Route } from '../src/outbox/provider-health.ts'
import { providerStates, takeProbeLease, type ProviderTransition } from '../src/outbox/provider-states-sql.ts'

/** Everything a delivery needs, injected so tests drive the clock and the providers. */
export type DeliveryDeps = {
  db: Knex
  boss: PgBoss
  /** The OUTBOX_ENCRYPTION_KEYS ring: an envelope opens under the key its id names. */
  outboxKey: KeyRing
  /** Each channel's providers in failover order (EMAIL_PROVIDERS): the outage hold and failover pick among them. */
  providers: Partial<Record<Channel, readonly Provider[]>>
  clock: () => Date
  logger: Logger
  settings: RetrySettings & { sendTimeoutMs: number }
  /** `<base>/join#token=…`; a worker without one does not start (no message ever spends attempts on it). */
  invitationLinkBaseUrl: string
  metrics?: WorkerMetrics
  /** The message templates with this deployment's branding (default: PRODUCT_NAME Sealpost, en). */
  templates?: Templates
  /** SEND_CAP_PER_HOUR and PHONE_CAP_PER_COUNTRY_PER_HOUR (default: none). */
  sendCaps?: SendCaps
  /** PHONE_CHANNELS: the phone channels in fallback order (default: WhatsApp, then SMS). */
  phoneChannels?: readonly Channel[]
}

export type DeliveryJob = Pick<Job<DeliveryJobData>, 'id' | 'retryCount' | 'data'>

/** A claimed message's outcome on its way to the record step, with what its log lines carry. */
export type PendingRecord = RecordRequest & { context: Record<string, unknown> }

/** What a job asks the claim step for: its message, under its own pg-boss attempt. */
export function claimRequestOf(job: DeliveryJob): ClaimRequest {
  return { messageId: job.data.messageId, lease: { jobId: job.id, retryCount: job.retryCount } }
}

export function logSettled(deps: Pick<DeliveryDeps, 'logger'>, request: ClaimRequest, claim: Extract<Claim, { kind: 'settled' }>): void {
  deps.logger.info('delivery settled without sending', { messageId: request.messageId, why: claim.why })
}

/**
 * The claimed messages whose destination is on the suppression list (a permanent bounce or a
 * complaint), checked before any send: read by the common case's claim statement itself, and in
 * one statement for whatever the full path claimed.
 */
export async function suppressedClaims(
  deps: Pick<DeliveryDeps, 'db'>,
  claims: readonly (Claim | { kind: 'failed' })[],
): Promise<Set<string>> {
  const claimed = claims.flatMap((claim) => (claim.kind === 'claimed' ? [claim] : []))
  const known = claimed.filter((claim) => claim.suppressed === true).map((claim) => claim.message.id)
  // Fail closed: whatever is not a plain false the claim read (not read, null) is asked.
  const unknown = claimed.filter((claim) => claim.suppressed !== true && claim.suppressed !== false).map((claim) => claim.message.id)
  return new Set([...known, ...(await suppressedAmong(deps.db, unknown))])
}

/**
 * The per-message steps after a claim: open, render, send, classify. Never throws. A suppressed
 * destination is never sent to again. A message whose channel has no provider in this worker, or
 * whose envelope is of a version this release does not open, spends no attempt: it waits a minute
 * (`withoutProvider`, `unreadableFormat`) for a worker that can.
 */
export async function sendClaimed(
  deps: DeliveryDeps,
  request: ClaimRequest,
  claim: Extract<Claim, { kind: 'claimed' }>,
  suppressed = false,
  route?: Route,
): Promise<PendingRecord> {
  const { message } = claim
  // The channel it goes out on now: a phone message's fallback may be SMS, where the country list applies too.
  const sendsOn = routedChannel(deps, message.channel, route) ?? message.channel
  if (!suppressed && smsCountryRefused(deps.sendCaps, sendsOn, message.destination)) return outsideSmsCountries(deps, request, claim)
  if (!suppressed && !hasProvider(deps, message.channel)) return withoutProvider(deps, request, claim)
  const format = unknownEnvelopeVersion(claim.envelope)
  if (!suppressed && format !== undefined) return unreadableFormat(deps, request, claim, format)
  const sendTo =
    route?.kind === 'send' ? route : { kind: 'send' as const, provider: providersFor(deps, message.channel)[0]?.id ?? '', probe: false }
  const context = {
    messageId: request.messageId,
    purpose: message.purpose,
    channel: message.channel,
    attempt: message.attempt_count + 1,
    provider: sendTo.provider,
    ...(sendTo.probe ? { probe: true } : {}),
  }
  const outcome: Outcome = suppressed
    ? { kind: 'dead_letter', reason: 'destination_suppressed' }
    : await attempt(deps, claim, sendTo, context)
  return { messageId: request.messageId, lease: request.lease, outcome, context }
}

/**
 * An SMS to a number outside SMS_ALLOWED_COUNTRIES: dead-lettered `provider_rejected` without a
 * send (docs/delivery.md "SMS pumping"). Final, whichever worker claims it: the list is the
 * deployment's, and no later hour changes the number's country. The line names the message, never the number.
 */
function outsideSmsCountries(deps: DeliveryDeps, request: ClaimRequest, claim: Extract<Claim, { kind: 'claimed' }>): PendingRecord {
  const { message } = claim
  const context = { messageId: request.messageId, purpose: message.purpose, channel: message.channel }
  deps.logger.warn('SMS COUNTRY NOT ALLOWED: the message is dead-lettered unsent (SMS_ALLOWED_COUNTRIES)', context)
  return { messageId: request.messageId, lease: request.lease, outcome: { kind: 'dead_letter', reason: 'provider_rejected' }, context }
}

/**
 * Where each claimed message's attempt goes (src/outbox/provider-health.ts `routeFor`): the fleet's
 * provider states are read once per batch; a probe of a provider held down is sent only by the
 * message that wins its lease (one per provider, fleet-wide), and every other message of a channel
 * whose providers are all down is held without spending an attempt. `skip`: messages that will not
 * be sent anyway (suppressed, held by a send cap).
 */
export async function routeClaims(
  deps: Pick<DeliveryDeps, 'db' | 'providers' | 'phoneChannels' | 'clock' | 'logger' | 'settings' | 'sendCaps'>,
  claims: readonly (Claim | { kind: 'failed' })[],
  skip: (messageId: string) => boolean,
  /** Told which providers the fleet holds down, as this batch read them. */
  seen?: (down: ReadonlySet<string>) => void,
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
  const states: Map<string, ProviderHealth> = await providerStates(deps.db)
  seen?.(new Set([...states.values()].flatMap((health) => (health.state === 'down' ? [health.provider] : []))))
  // The channels a phone message already proved unable to reach its number (only one that had an attempt can have).
  const unreachable = await unreachableChannels(
    deps.db,
    messages.filter((message) => message.attempt_count > 0 && routeChannels(deps, message.channel).length > 1).map((message) => message.id),
  )
  for (const message of messages) {
    const proven = unreachable.get(message.id)
    // SMS is never a fallback to a number outside SMS_ALLOWED_COUNTRIES: the route leaves it out.
    const barred = message.channel === 'whatsapp' && smsCountryRefused(deps.sendCaps, 'sms', message.destination)
    const left = barred ? new Set<Channel>([...(proven ?? []), 'sms']) : proven
    // With every channel of its route unreachable (the fleet's phone channels changed meanwhile), its own channel answers.
    const channels = left && providersFor(deps, message.channel, left).length > 0 ? left : undefined
    const providers = providersFor(deps, message.channel, channels)
    const chain = providers.map((provider) => provider.id)
    let route = routeFor(chain, message.attempt_count, states, message, now, policy)
    if (route.kind === 'send' && route.probe) {
      const until = new Date(now.getTime() + deps.settings.sendTimeoutMs + 5_000)
      const won = await takeProbeLease(deps.db, route.provider, until, now)
      // Won or lost, a probe is now in flight: the rest of this batch is held.
      states.set(route.provider, { ...states.get(route.provider)!, probeUntil: until })
      if (won)
        deps.logger.info('provider probe: one message tests whether a provider held down is back', {
          provider: route.provider,
          messageId: message.id,
        })
      else route = routeFor(chain, message.attempt_count, states, message, now, policy)
    }
    if (route.kind === 'send' && channelLeftAfter(deps, message.channel, channels, routedChannel(deps, message.channel, route)))
      route = { ...route, fallbackLeft: true }
    routes.set(message.id, route)
  }
  return routes
}

/** Logs and counts what the record step decided for one message. */
export function reportRecorded(deps: Pick<DeliveryDeps, 'logger' | 'metrics'>, entry: PendingRecord, result: Recorded): void {
  const { context, outcome } = entry
  if (result.kind === 'lease_lost') deps.logger.warn('lease lost: result not recorded', context)
  else deps.logger.info('delivery recorded', { ...context, ...result })
  if (result.kind !== 'lease_lost' && outcome.kind !== 'dead_letter' && outcome.kind !== 'deferred') {
    deps.metrics?.attempt(
      result.kind === 'published' ? 'published' : result.kind === 'retry_scheduled' ? 'retryable_error' : 'failed',
      outcome.kind === 'failed' ? outcome.failureClass : null,
    )
  }
  if (result.kind === 'dead_lettered') deps.metrics?.deadLettered(result.reason)
  for (const transition of result.transitions ?? []) logTransition(deps, transition)
}

/** One log line for every change of a provider's state (docs/operations.md "Runbook: a provider is held down"). */
function logTransition(deps: Pick<DeliveryDeps, 'logger'>, transition: ProviderTransition): void {
  const { provider, channel, failureStreak, nextProbeAt, released } = transition
  if (transition.to === 'down')
    deps.logger.warn('PROVIDER HELD DOWN: its messages wait without spending attempts; one probe at a time tests it', {
      provider,
      channel,
      failureStreak,
      nextProbeAt: nextProbeAt?.toISOString(),
    })
  else if (transition.to === 'up')
    deps.logger.info('provider is back: the hold is lifted and its held messages go out now', { provider, channel, released })
  else deps.logger.info('provider probe failed: still held down', { provider, channel, nextProbeAt: nextProbeAt?.toISOString() })
}

/** Opens the envelope and sends through the routed provider; every failure becomes an outcome, nothing throws. */
async function attempt(
  deps: DeliveryDeps,
  claim: Extract<Claim, { kind: 'claimed' }>,
  route: Extract<Route, { kind: 'send' }>,
  context: Record<string, unknown>,
): Promise<Outcome> {
  const { message } = claim
  let secret: Buffer
  try {
    secret = open(deps.outboxKey, claim.envelope, envelopeContext(message.id, message.purpose, message.channel, message.destination))
  } catch (error) {
    // A human must look: tampering, a wrong key or a botched deploy, never a flaky network.
    deps.logger.error('SECURITY: security outbox envelope failed to open', { ...context, ...describeError(error), security: true })
    return { kind: 'dead_letter', reason: 'decryption_failed' }
  }

  const provider = providersFor(deps, message.channel).find((candidate) => candidate.id === route.provider)
  const sendsOn = (provider && channelOfProvider(deps, message.channel, provider.id)) ?? message.channel
  const sent = provider ? { id: provider.id, probe: route.probe, channel: sendsOn } : undefined
  if (message.attempt_count === 0) deps.metrics?.firstSendStarted(sendsOn, (deps.clock().getTime() - message.created_at.getTime()) / 1000)
  const started = performance.now()
  try {
    if (!provider) throw new DeliveryFailureError('UNAVAILABLE', 'ChannelNotConfigured')
    let content: ReturnType<typeof composeMessage>
    try {
      // Worded for the channel it goes out on (a phone message may fall back to SMS); sealed for its own.
      content = composeMessage(deps.templates ?? defaultTemplates(), { ...message, channel: sendsOn }, secret, {
        organizationName: claim.organizationName,
        invitationLinkBaseUrl: deps.invitationLinkBaseUrl,
        now: deps.clock(),
      })
    } catch (error) {
      if (!(error instanceof UnreadableBodyError)) throw error
      deps.logger.error('SECURITY: a sealed message body is unreadable', { ...context, ...describeError(error), security: true })
      return { kind: 'dead_letter', reason: 'decryption_failed' }
    }
    deps.metrics?.sendStarted(sendsOn)
    const { providerMessageId } = await provider.dispatch(
      { messageId: message.id, destination: message.destination, purpose: message.purpose, locale: message.locale, ...content },
      AbortSignal.timeout(deps.settings.sendTimeoutMs),
    )
    deps.metrics?.sent(sendsOn, (performance.now() - started) / 1000)
    return { kind: 'published', providerMessageId, durationMs: performance.now() - started, ...(sent ? { provider: sent } : {}) }
  } catch (error) {
    const failure = error instanceof DeliveryFailureError ? error : undefined
    if (failure?.effect === 'provider_misconfigured' && sent) return heldAsMisconfigured(deps, sent, failure, context)
    const outcome: Outcome = {
      kind: 'failed',
      failureClass: failure?.failureClass ?? 'unexpected_worker_error',
      retryAfterAt: failure?.retryAfterAt ?? null,
      durationMs: performance.now() - started,
      ...(sent ? { provider: sent } : {}),
      ...(failure?.recipientOnly ? { recipientOnly: true as const } : {}),
      // This channel cannot reach the number: the next attempt goes at once to the next phone channel, if one is left.
      ...(failure?.effect === 'channel_unreachable' && route.fallbackLeft ? { fallback: true as const } : {}),
    }
    deps.logger.warn('delivery attempt failed', {
      ...context,
      failureClass: outcome.failureClass,
      providerCode: failure?.providerCode,
      ...describeError(error),
    })
    return outcome
  } finally {
    secret.fill(0)
  }
}
