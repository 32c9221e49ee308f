import type { Channel, ProviderState } from './constants.ts'

/**
 * Provider health as a circuit breaker per provider, held by the whole fleet in
 * `outbox.provider_states` (docs/delivery.md "The outage hold and failover"), as pure functions of
 * the clock and a random source. The models are resilience4j's CircuitBreaker (a failure rate over
 * a sliding window of calls, counted only past a minimum number of calls; a half-open state that
 * lets a few calls through) and Envoy's outlier detection (ejection on a success rate, never on one
 * unlucky call). A provider is held down (open) only on sustained failure: at least
 * `minimumCalls` calls within the window, at least `failureRate` of them failing on the
 * provider's side. While held, its messages wait without spending attempts and probes test it
 * (half-open): one worker at a time wins the probe lease and sends up to `halfOpenProbes`
 * messages; any answer among them that proves the provider is there closes the breaker, a failed
 * probe pushes the next one out (jittered, doubling up to `probeMaxMs`). Answers about one
 * recipient and REJECTEDs never count as failures; `provider_misconfigured` holds at once (a fault
 * of ours, not a rate). Below the threshold each worker backs off by concurrency instead
 * (src/runtime/provider-limits.ts).
 */
export type HealthPolicy = {
  /** The sliding window: a provider's calls of the last `windowMs`… */
  windowMs: number
  /** …and at most its last `windowCalls` of them (a count bound keeps the read short at any rate). */
  windowCalls: number
  /** Fewer calls than this in the window never hold a provider, whatever their failure rate. */
  minimumCalls: number
  /** The share of provider-side failures among the window's calls that holds it (0–1). */
  failureRate: number
  /** The messages one worker sends as probes under one probe lease (the half-open calls). */
  halfOpenProbes: number
  /** The first probe interval; it doubles with each failed probe up to `probeMaxMs`. */
  probeBaseMs: number
  /** The longest probe interval: a recovered provider is found within about this long. */
  probeMaxMs: number
  random: () => number
}

/**
 * At most the last 100 calls, looking back at most two minutes: on a busy provider the count
 * bounds the window (and the read), on a quiet one the time does, long enough for the retries of a
 * few codes to reach the minimum: a dead provider of a quiet deployment is still held.
 */
export const DEFAULT_HEALTH_POLICY = Object.freeze({
  windowMs: 120_000,
  windowCalls: 100,
  minimumCalls: 20,
  failureRate: 0.9,
  halfOpenProbes: 3,
  probeBaseMs: 5_000,
  probeMaxMs: 20_000,
})

export const defaultHealthPolicy = (): HealthPolicy => ({ ...DEFAULT_HEALTH_POLICY, random: Math.random })

/**
 * One provider's row as the fleet holds it, and its throttle pause if one runs
 * (`outbox.paused_providers`). `failureStreak`: the provider-side failures of the window that held
 * it (the previous release's worker counts a streak in it).
 */
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
  pausedUntil?: Date | null
}

/** A provider's calls in the window as the attempt rows hold them: calls that count, and the provider-side failures among them. */
export type CallWindow = { calls: number; failures: number }

/** Whether a window's calls hold the provider down: enough of them, and failing at the threshold's rate. */
export function windowTrips(window: CallWindow, policy: Pick<HealthPolicy, 'minimumCalls' | 'failureRate'>): boolean {
  return window.calls >= policy.minimumCalls && window.failures >= policy.failureRate * window.calls
}

/**
 * What operators see: `up` (closed), `probing` (half-open: held, with a probe in flight) or
 * `down` (open: held, waiting for its next probe).
 */
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

/** What the record step did with one provider's row, and the change operators hear of (one log line each). */
export type HealthChange = { health: ProviderHealth; transition?: 'down' | 'up' | 'probe_failed' }

/** What the record step reports for a change of a provider's state. */
export type ProviderTransition = {
  provider: string
  channel: Channel
  to: 'down' | 'up' | 'probe_failed'
  /** `down`: the provider-side failures in the window that held it (or 0 for a misconfiguration). */
  failureStreak: number
  nextProbeAt: Date | null
  /** `up`: the held messages called back at once. */
  released?: number
}

/** Held down now (open), its first probe one jittered base interval away; `failures`: what the window counted. */
export function heldDown(current: ProviderHealth, failures: number, now: Date, policy: HealthPolicy): HealthChange {
  return {
    health: {
      ...current,
      state: 'down',
      failureStreak: failures,
      lastFailureAt: now,
      downSince: now,
      probeIntervalMs: policy.probeBaseMs,
      nextProbeAt: new Date(now.getTime() + jittered(policy.probeBaseMs, policy)),
      probeUntil: null,
    },
    transition: 'down',
  }
}

/**
 * A probe of a provider held down failed: the next probe twice as far (capped, jittered) and the
 * probe lease let go, once per lease (the other probes sent under it fail without pushing it
 * further). A failure that was no probe changes nothing: it was sent before the hold.
 */
export function afterFailedProbe(current: ProviderHealth, now: Date, policy: HealthPolicy): HealthChange {
  if (current.state !== 'down' || current.probeUntil === null) return { health: current }
  const probeIntervalMs = Math.min(policy.probeMaxMs, Math.max(policy.probeBaseMs, (current.probeIntervalMs ?? policy.probeBaseMs) * 2))
  return {
    health: {
      ...current,
      lastFailureAt: now,
      probeIntervalMs,
      nextProbeAt: new Date(now.getTime() + jittered(probeIntervalMs, policy)),
      probeUntil: null,
    },
    transition: 'probe_failed',
  }
}

/** A probe proved the provider is there (a success, or an answer about its recipient): the hold lifts (closed). */
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
