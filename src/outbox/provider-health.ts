import type { ProviderState } from './constants.ts'

/**
 * The outage hold, a circuit breaker per provider held by the whole fleet in
 * `outbox.provider_states` (docs/delivery.md "The outage hold and failover"), as pure functions of the clock and
 * a random source. A provider that keeps answering UNAVAILABLE / INDETERMINATE is marked down:
 * its messages are held without spending attempts, one probe at a time tests it at a jittered,
 * growing interval, and any answer that proves it is there (a success, or a REJECTED, which is the
 * recipient's fault, not the provider's) lifts the hold.
 */
export type HealthPolicy = {
  /** Transient failures in a row, fleet-wide, that mark a provider down. */
  downAfter: number
  /** A streak whose last failure is older than this starts again. */
  streakWindowMs: number
  /** The first probe interval; it doubles with each failed probe up to `probeMaxMs`. */
  probeBaseMs: number
  /** The longest probe interval: a recovered provider is found within about this long. */
  probeMaxMs: number
  random: () => number
}

export const DEFAULT_HEALTH_POLICY = Object.freeze({ downAfter: 5, streakWindowMs: 120_000, probeBaseMs: 5_000, probeMaxMs: 20_000 })

export const defaultHealthPolicy = (): HealthPolicy => ({ ...DEFAULT_HEALTH_POLICY, random: Math.random })

/** One provider's row as the fleet holds it. */
export type ProviderHealth = {
  provider: string
  channel: string
  state: ProviderState
  failureStreak: number
  lastFailureAt: Date | null
  downSince: Date | null
  probeIntervalMs: number | null
  nextProbeAt: Date | null
  probeUntil: Date | null
}

/** What operators see: `probing` is a down provider with a probe in flight. */
export type ProviderView = 'up' | 'probing' | 'down'

/** The gauge's value for each view (sealpost_provider_state). */
export const PROVIDER_VIEW_GAUGE: Readonly<Record<ProviderView, number>> = Object.freeze({ up: 0, probing: 1, down: 2 })

export function viewOf(health: ProviderHealth | undefined, now: Date): ProviderView {
  if (!health || health.state === 'up') return 'up'
  return health.probeUntil && health.probeUntil.getTime() > now.getTime() ? 'probing' : 'down'
}

/** Equal jitter: half the interval fixed, half random, so a fleet's probes do not line up. */
function jittered(intervalMs: number, policy: Pick<HealthPolicy, 'random'>): number {
  return Math.round(intervalMs * (0.5 + 0.5 * Math.min(1, Math.max(0, policy.random()))))
}

/** What a batch of answers from one provider did to its row. */
export type HealthChange = { health: ProviderHealth; transition?: 'down' | 'up' | 'probe_failed' }

/**
 * After `failures` transient answers (UNAVAILABLE, INDETERMINATE). Up: the streak grows (restarting
 * if its last failure is older than the window) and at `downAfter` the provider goes down with its
 * first probe one jittered base interval away. Down: a failed probe doubles the interval (capped)
 * and lets the probe lease go; a failure of a send that began before the hold only counts.
 */
export function afterTransientFailures(
  current: ProviderHealth,
  failures: { count: number; probe: boolean },
  now: Date,
  policy: HealthPolicy,
): HealthChange {
  if (current.state === 'down' && !failures.probe)
    return { health: { ...current, failureStreak: current.failureStreak + failures.count, lastFailureAt: now } }
  if (current.state === 'down') {
    const probeIntervalMs = Math.min(policy.probeMaxMs, Math.max(policy.probeBaseMs, (current.probeIntervalMs ?? policy.probeBaseMs) * 2))
    return {
      health: {
        ...current,
        failureStreak: current.failureStreak + failures.count,
        lastFailureAt: now,
        probeIntervalMs,
        nextProbeAt: new Date(now.getTime() + jittered(probeIntervalMs, policy)),
        probeUntil: null,
      },
      transition: 'probe_failed',
    }
  }
  const fresh = current.lastFailureAt !== null && now.getTime() - current.lastFailureAt.getTime() <= policy.streakWindowMs
  const failureStreak = (fresh ? current.failureStreak : 0) + failures.count
  if (failureStreak < policy.downAfter) return { health: { ...current, failureStreak, lastFailureAt: now } }
  return {
    health: {
      ...current,
      state: 'down',
      failureStreak,
      lastFailureAt: now,
      downSince: now,
      probeIntervalMs: policy.probeBaseMs,
      nextProbeAt: new Date(now.getTime() + jittered(policy.probeBaseMs, policy)),
      probeUntil: null,
    },
    transition: 'down',
  }
}

/** After an answer that proves the provider is there: the streak ends and any hold lifts. */
export function afterAnswer(current: ProviderHealth): HealthChange {
  const health: ProviderHealth = {
    ...current,
    state: 'up',
    failureStreak: 0,
    downSince: null,
    probeIntervalMs: null,
    nextProbeAt: null,
    probeUntil: null,
  }
  return current.state === 'down' ? { health, transition: 'up' } : { health }
}

/** Where one claimed message goes: a provider (a probe when it is held down), or back to wait. */
/** `held.providers`: the chain that is down, so the record step can tell whether one came back meanwhile. */
/**
 * `fallbackLeft` (set by the delivery step, not here): a later phone channel with a provider is left
 * on the message's route after the routed provider's, so a `channel_unreachable` answer goes on to it.
 */
export type Route =
  { kind: 'send'; provider: string; probe: boolean; fallbackLeft?: boolean } | { kind: 'held'; until: Date; providers: readonly string[] }

/**
 * The provider for a message's next attempt, from its channel's chain in the configured order. The
 * attempt number rotates the start: a message whose attempt on the first provider failed tries the
 * next one on its next attempt (failover), and providers held down are skipped — except that one
 * whose next probe is due (and has none in flight) is offered as a probe, in its place in the
 * chain (the caller must still win the probe's lease). With every provider down and no probe due,
 * the message is held until
 * a random moment within the longest interval after the earliest next probe: held messages come
 * back spread out, so one of them soon finds the probe due, and a hold that lifts calls the rest
 * back at once (this bounds the wait of any it missed). Never past its expiry.
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
    if (health?.state !== 'down') return { kind: 'send', provider, probe: false }
    // A provider held down ahead of one that is up is still probed when due: else a healthy
    // second provider would take every message for good and the first would never be found back.
    const probeDue =
      (health.nextProbeAt?.getTime() ?? 0) <= now.getTime() && (health.probeUntil === null || health.probeUntil.getTime() <= now.getTime())
    if (probeDue) return { kind: 'send', provider, probe: true }
  }
  return { kind: 'held', until: heldUntil(chain, states, message, now, policy), providers: chain }
}

function heldUntil(
  chain: readonly string[],
  states: ReadonlyMap<string, ProviderHealth>,
  message: { expires_at: Date },
  now: Date,
  policy: Pick<HealthPolicy, 'probeMaxMs' | 'random'>,
): Date {
  const nextProbe = Math.min(
    ...chain.map((provider) => {
      const health = states.get(provider)!
      return Math.max(health.nextProbeAt?.getTime() ?? 0, health.probeUntil?.getTime() ?? 0, now.getTime())
    }),
  )
  const spread = Math.round(policy.probeMaxMs * Math.min(1, Math.max(0, policy.random())))
  const until = Math.min(nextProbe + 1 + spread, message.expires_at.getTime() - 1_000)
  // Expiry wins: with no time left to wait, the deferral lands on the expiry and dead-letters it.
  return new Date(until > now.getTime() ? until : message.expires_at.getTime())
}
