import type { HealthPolicy, ProviderHealth } from './provider-health.ts'

/**
 * Where one claimed message goes: a provider (a probe when it is held down), or back to wait.
 * `held.providers`: those of its chain held down (not merely paused), so the record step can tell
 * whether one came back meanwhile. `fallbackLeft` (set by the delivery step, not here): a later
 * phone channel with a provider is left on the message's route after the routed provider's, so a
 * `channel_unreachable` answer goes on to it.
 */
export type Route =
  { kind: 'send'; provider: string; probe: boolean; fallbackLeft?: boolean } | { kind: 'held'; until: Date; providers: readonly string[] }

/** Whether a provider's throttle pause still runs at `now`. */
export const pausedAt = (health: ProviderHealth | undefined, now: Date): boolean => (health?.pausedUntil?.getTime() ?? 0) > now.getTime()

/**
 * The provider for a message's next attempt, from its chain in the configured order. The attempt
 * number rotates the start: a message whose attempt on the first provider failed tries the next one
 * on its next attempt (failover). A provider whose throttle pause runs is skipped; so is one held
 * down, except that one whose next probe is due (and has none in flight) is offered as a probe, in
 * its place in the chain (the caller must still win the probe's lease). With no provider left the
 * message waits: until the earliest pause ends, or until a random moment within the longest
 * probe interval after the earliest next probe (held messages come back spread out, so one of them
 * soon finds the probe due, and a hold that lifts calls the rest back at once). Never past its expiry.
 */
export function routeFor(
  chain: readonly string[],
  attemptCount: number,
  states: ReadonlyMap<string, ProviderHealth>,
  message: { expires_at: Date },
  now: Date,
  policy: Pick<HealthPolicy, 'probeMaxMs' | 'random'>,
): Route {
  const rotated = chain.map((_, index) => chain[(attemptCount + index) % chain.length]!)
  for (const provider of rotated) {
    const health = states.get(provider)
    if (pausedAt(health, now)) continue
    if (health?.state !== 'down') return { kind: 'send', provider, probe: false }
    // A provider held down ahead of one that is up is still probed when due: else a healthy
    // second provider would take every message for good and the first would never be found back.
    const probeDue =
      (health.nextProbeAt?.getTime() ?? 0) <= now.getTime() && (health.probeUntil === null || health.probeUntil.getTime() <= now.getTime())
    if (probeDue) return { kind: 'send', provider, probe: true }
  }
  const down = chain.filter((provider) => states.get(provider)?.state === 'down')
  return { kind: 'held', until: heldUntil(chain, states, message, now, policy), providers: down }
}

/** When the first provider of the chain can take the message again: a pause's end as it is, a probe's spread out. */
function heldUntil(
  chain: readonly string[],
  states: ReadonlyMap<string, ProviderHealth>,
  message: { expires_at: Date },
  now: Date,
  policy: Pick<HealthPolicy, 'probeMaxMs' | 'random'>,
): Date {
  const spread = Math.round(policy.probeMaxMs * Math.min(1, Math.max(0, policy.random())))
  const free = Math.min(
    ...chain.map((provider) => {
      const health = states.get(provider)!
      const paused = pausedAt(health, now) ? health.pausedUntil!.getTime() : now.getTime()
      if (health.state !== 'down') return paused
      const probe = Math.max(health.nextProbeAt?.getTime() ?? 0, health.probeUntil?.getTime() ?? 0, now.getTime())
      return Math.max(paused, probe + 1 + spread)
    }),
  )
  const until = Math.min(free, message.expires_at.getTime() - 1_000)
  // Expiry wins: with no time left to wait, the deferral lands on the expiry and dead-letters it.
  return new Date(until > now.getTime() ? until : message.expires_at.getTime())
}
