import type { Claim, ClaimRequest } from '../src/outbox/claim.ts'
import type { DeliveryFailureError } from '../src/providers/provider.ts'
import type { Outcome, Sent } from '../src/outbox/outcomes.ts'
import type { DeliveryDeps, PendingRecord } from './delivery-deps.ts'

/**
 * The deferrals of claimed messages this worker does not send now: no provider here, an envelope
 * version it does not open, a send cap, a pause, an outage hold, a provider busy at its
 * concurrency limit. Each is recorded without spending an attempt.
 */

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
  return deferClaimed(request, claim, { until: new Date(now + WITHOUT_PROVIDER_WAIT_MS) })
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
 * A claimed message not sent now, recorded as deferred with no attempt spent: `until` a send cap's
 * hour, an outage hold's moment or a busy provider's back-off; `heldFor` the providers held down
 * it waits for; `pausedProvider` the provider it was routed to, paused meanwhile (the record step
 * waits out that pause as the database holds it).
 */
export function deferClaimed(
  request: ClaimRequest,
  claim: Extract<Claim, { kind: 'claimed' }>,
  why: { until?: Date; heldFor?: readonly string[]; pausedProvider?: string } = {},
): PendingRecord {
  const { message } = claim
  const { until, heldFor, pausedProvider } = why
  return {
    messageId: request.messageId,
    lease: request.lease,
    outcome: {
      kind: 'deferred',
      ...(until ? { until } : {}),
      ...(heldFor && heldFor.length > 0 ? { heldFor } : {}),
      ...(pausedProvider ? { pausedProvider } : {}),
    },
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
