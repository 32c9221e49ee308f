import type { Claim } from '../src/outbox/claim.ts'
import type { MessageRow } from '../src/outbox/messages-sql.ts'
import type { Route } from '../src/outbox/provider-route.ts'
import {
  CAP_KINDS,
  capScopeOf,
  crossedCap,
  crossedNearCap,
  NEAR_CAP_RATIO,
  sendCapsConfigured,
  sendWindow,
  smsCountryRefused,
  type Asked,
  type CapScope,
} from '../src/outbox/send-caps.ts'
import { messageAskers, reserveSends } from '../src/outbox/send-windows-sql.ts'
import { canAttempt, routedChannel } from './deliver-routes.ts'
import type { DeliveryDeps } from './delivery-deps.ts'

type CapDeps = Pick<DeliveryDeps, 'db' | 'clock' | 'logger' | 'metrics' | 'sendCaps' | 'providers' | 'phoneChannels'>
type Counted = MessageRow & { asked: Asked }

/** A cap's scope as a log line may show it: a prefix cut to its first four digits (a calling code and a little more), never a number. */
function shownScope(scope: CapScope): Record<string, string> {
  const base = scope.scope.replace(/^[oc]/, '')
  if (scope.kind === 'country') return { callingCode: base }
  if (scope.kind === 'prefix') return { prefix: `${base.slice(1, 5)}•••` }
  return {}
}

/** The messages the caps count: claimed, not suppressed, routed to a send on the channel it goes out on. */
function countedMessages(
  deps: CapDeps,
  claims: readonly (Claim | { kind: 'failed' })[],
  suppressed: ReadonlySet<string>,
  routes: ReadonlyMap<string, Route>,
) {
  return claims.flatMap((claim) => {
    if (claim.kind !== 'claimed' || suppressed.has(claim.message.id) || !canAttempt(deps, claim)) return []
    const channel = routedChannel(deps, claim.message, routes.get(claim.message.id))
    return channel && !smsCountryRefused(deps.sendCaps, channel, claim.message.destination) ? [{ ...claim.message, channel }] : []
  })
}

/**
 * The claimed messages a send cap holds back, each with the end of the hour it waits for
 * (docs/security.md "Caps from the owner's side"). Who asked for each message is read once per
 * batch (`outbox.message_askers`: what the web wrote on it). Owners' messages are never held: they
 * count on counters of their own, for the operator, so nothing a stranger fills stands between an
 * owner and their code. Strangers' are held at each cap; courier and hook messages count with
 * strangers', or in their own share (COURIER_CAP_SHARE). Every cap a message counts against is
 * asked for room in one statement per counter and batch (an SMS's number prefix first, then its
 * country's, then its channel's), in claim order. A message counts on the channel its route sends
 * it on (a phone message that falls back to SMS counts against the sms caps), so only messages
 * routed to a send count: suppressed ones, ones held for an outage, ones this worker has no
 * provider for and an SMS to a country SMS may not reach take no slot. A message a later cap then
 * holds has taken a slot of the earlier ones that nobody sends this hour; every counter ends with
 * the same hour, and the later one is full until then, so nothing is lost by it. The first refusal
 * of an hour, fleet-wide, is logged (SEND CAP REACHED), so is the reservation that takes a counter
 * to 80 % (SEND CAP NEAR), and the one that takes owners' sends past the cap (OWNER SENDS PAST CAP):
 * none names a destination, only the channel, the calling code or the first digits of a prefix,
 * and who asked. Every held message is counted, and each reservation sets the fullest cap of its
 * kind and class (sealpost_send_cap_used_ratio).
 */
export async function heldBySendCaps(
  deps: CapDeps,
  claims: readonly (Claim | { kind: 'failed' })[],
  suppressed: ReadonlySet<string>,
  routes: ReadonlyMap<string, Route>,
): Promise<Map<string, Date>> {
  const held = new Map<string, Date>()
  const caps = deps.sendCaps
  if (!sendCapsConfigured(caps)) return held
  const counted = countedMessages(deps, claims, suppressed, routes)
  if (counted.length === 0) return held
  const askers = await messageAskers(
    deps.db,
    counted.map((message) => message.id),
  )
  let passing: Counted[] = counted.map((message) => ({ ...message, asked: askers.get(message.id) ?? 'stranger' }))
  const now = deps.clock()
  const window = sendWindow(now)
  for (const kind of CAP_KINDS) {
    const groups = new Map<string, { scope: CapScope; messages: Counted[] }>()
    for (const message of passing) {
      const scope = capScopeOf(caps, kind, message, message.asked)
      if (!scope) continue
      const key = `${scope.channel}:${scope.scope}`
      const group = groups.get(key) ?? { scope, messages: [] }
      group.messages.push(message)
      groups.set(key, group)
    }
    for (const { scope, messages } of groups.values()) {
      const { granted, firstHold, sent } = await reserveSends(deps.db, scope, window.start, messages.length, now)
      const refused = messages.slice(granted)
      for (const message of refused) held.set(message.id, window.end)
      reportReservation(deps, scope, { refused: refused.length, granted, firstHold, sent }, window)
    }
    passing = passing.filter((message) => !held.has(message.id))
  }
  return held
}

/** The metrics and the warnings of one reservation. */
function reportReservation(
  deps: Pick<CapDeps, 'logger' | 'metrics'>,
  scope: CapScope,
  outcome: { refused: number; granted: number; firstHold: boolean; sent: number },
  window: { start: Date; end: Date },
): void {
  const { refused, granted, firstHold, sent } = outcome
  if (refused > 0) deps.metrics?.heldBySendCap(scope.channel, scope.kind, scope.asked, refused)
  const fields = { channel: scope.channel, cap: scope.kind, asked: scope.asked, ...shownScope(scope), limitPerHour: scope.cap }
  if (!scope.bounded) {
    // Owners' use may pass 1: nothing holds it, and how far past the cap it goes is what the operator needs.
    deps.metrics?.sendCapUsed(scope.channel, scope.kind, scope.asked, sent / Math.max(scope.cap, 1), window.start)
    if (crossedCap(scope.cap, sent - granted, sent))
      deps.logger.warn('OWNER SENDS PAST CAP: owners asked for more codes this hour than the cap lets strangers send; none is held', {
        ...fields,
        sent,
      })
    return
  }
  deps.metrics?.sendCapUsed(scope.channel, scope.kind, scope.asked, scope.cap > 0 ? Math.min(sent / scope.cap, 1) : 1, window.start)
  if (crossedNearCap(scope.cap, sent - granted, sent))
    deps.logger.warn(`SEND CAP NEAR: ${NEAR_CAP_RATIO * 100} % of this hour's sends are used`, { ...fields, sent })
  if (firstHold)
    deps.logger.warn('SEND CAP REACHED: sends on this channel are held until the hour ends', {
      ...fields,
      heldUntil: window.end.toISOString(),
    })
}
