import { envelopeContext, open, unknownEnvelopeVersion } from '../src/crypto/envelope.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { composeMessage, defaultTemplates, UnreadableBodyError } from '../src/delivery/compose.ts'
import { suppressedAmong } from '../src/outbox/delivery-events-sql.ts'
import { describeError } from '../src/logging/logger.ts'
import type { Claim, ClaimRequest } from '../src/outbox/claim.ts'
import type { Outcome, Recorded } from '../src/outbox/outcomes.ts'
import type { ProviderTransition } from '../src/outbox/provider-health.ts'
import type { Route } from '../src/outbox/provider-route.ts'
import { smsCountryRefused } from '../src/outbox/send-caps.ts'
import type { DeliveryDeps, PendingRecord } from './delivery-deps.ts'
import { heldAsMisconfigured, unreadableFormat, withoutProvider } from './deliver-holds.ts'
import { channelOfProvider, hasProvider, providersFor, routedChannel } from './deliver-routes.ts'

/**
 * One claimed message's own steps (docs/architecture.md §4, steps 3–5): the checks that keep it
 * from a send (suppressed, a country SMS may not reach, no provider here, an envelope this release
 * does not open), then open, render, send and classify; and the report of what the record step
 * decided. Routing is jobs/deliver-routes.ts, the deferrals jobs/deliver-holds.ts, the send caps
 * jobs/deliver-caps.ts; src/runtime/pipeline-step.ts runs them in order.
 */

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
  const sendsOn = routedChannel(deps, message, route) ?? message.channel
  if (!suppressed && smsCountryRefused(deps.sendCaps, sendsOn, message.destination)) return outsideSmsCountries(deps, request, claim)
  if (!suppressed && !hasProvider(deps, message)) return withoutProvider(deps, request, claim)
  const format = unknownEnvelopeVersion(claim.envelope)
  if (!suppressed && format !== undefined) return unreadableFormat(deps, request, claim, format)
  const sendTo =
    route?.kind === 'send' ? route : { kind: 'send' as const, provider: providersFor(deps, message)[0]?.id ?? '', probe: false }
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
    deps.logger.warn('PROVIDER HELD DOWN: its calls kept failing; its messages wait without spending attempts, and a few probes test it', {
      provider,
      channel,
      // The provider-side failures of the window that held it (0: it refused our own settings).
      failures: failureStreak,
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

  const provider = providersFor(deps, message).find((candidate) => candidate.id === route.provider)
  const sendsOn = (provider && channelOfProvider(deps, message, provider.id)) ?? message.channel
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
