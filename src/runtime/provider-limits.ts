import type { PendingRecord } from '../../jobs/delivery-deps.ts'
import { TRANSIENT_FAILURES } from '../outbox/constants.ts'

/**
 * How a worker backs off a struggling provider below the breaker's threshold: by concurrency, not
 * by stopping (docs/delivery.md "Below the threshold: fewer calls in flight"). Each provider has an
 * in-flight limit in this worker, moved AIMD-style (Netflix concurrency-limits' AIMD limit; TCP's
 * congestion window): while more than `shrinkAbove` of the provider's recent calls here failed on
 * its side (the last `windowCalls`), each such failure multiplies the limit by `decrease`; every
 * success adds one, up to the worker's concurrency. A provider failing a third of its calls never
 * crosses the line, so it keeps its throughput (two thirds of its calls deliver); one that hangs or
 * fails nearly every call is held to a few slots within one round of timeouts, so it cannot take
 * every send slot from the others. After a hold lifts, the limit starts from `rampFrom` of the
 * concurrency and grows back with each success.
 */
export type LimitPolicy = {
  windowCalls: number
  shrinkAbove: number
  decrease: number
  rampFrom: number
  /** Longest a message turned away by a full limit waits before it is claimed again. */
  maxBackoffMs: number
  random: () => number
}

export const DEFAULT_LIMIT_POLICY: Readonly<Omit<LimitPolicy, 'random'>> = Object.freeze({
  windowCalls: 32,
  shrinkAbove: 0.5,
  decrease: 0.9,
  rampFrom: 1 / 8,
  maxBackoffMs: 30_000,
})

/** What one outcome says about its provider's load: a call that went through, one that failed on its side, or nothing. */
export type Verdict = 'success' | 'failure' | 'neutral'

export function verdictOf(entry: PendingRecord): Verdict {
  const { outcome } = entry
  if (outcome.kind === 'published') return 'success'
  if (outcome.kind === 'deferred') return outcome.misconfigured ? 'failure' : 'neutral'
  if (outcome.kind !== 'failed' || outcome.recipientOnly === true) return 'neutral'
  return TRANSIENT_FAILURES.has(outcome.failureClass) || outcome.failureClass === 'THROTTLED' ? 'failure' : 'neutral'
}

type ProviderLoad = { limit: number; inFlight: number; recent: boolean[]; failed: number }

export type ProviderLimits = ReturnType<typeof providerLimits>

/** One worker's in-flight limits, one per provider it sends to; `max` is WORKER_CONCURRENCY. */
export function providerLimits(max: number, policy: LimitPolicy = { ...DEFAULT_LIMIT_POLICY, random: Math.random }) {
  const loads = new Map<string, ProviderLoad>()
  const loadOf = (provider: string): ProviderLoad => {
    let load = loads.get(provider)
    if (!load) loads.set(provider, (load = { limit: max, inFlight: 0, recent: [], failed: 0 }))
    return load
  }
  const remember = (load: ProviderLoad, failed: boolean) => {
    load.recent.push(failed)
    if (failed) load.failed += 1
    if (load.recent.length > policy.windowCalls && load.recent.shift()) load.failed -= 1
  }
  return {
    /** A slot for one call to `provider`, if its limit has room; never waits (the lease would not cover a wait). */
    tryAcquire(provider: string): boolean {
      const load = loadOf(provider)
      if (load.inFlight >= Math.floor(load.limit)) return false
      load.inFlight += 1
      return true
    },
    /** The call ended; what it said moves the limit. */
    release(provider: string, verdict: Verdict): void {
      const load = loadOf(provider)
      load.inFlight = Math.max(0, load.inFlight - 1)
      if (verdict === 'neutral') return
      remember(load, verdict === 'failure')
      if (verdict === 'success') load.limit = Math.min(max, load.limit + 1)
      else if (load.failed > policy.shrinkAbove * load.recent.length) load.limit = Math.max(1, load.limit * policy.decrease)
    },
    /** The fleet lifted the provider's hold: its traffic ramps back from a few slots instead of rushing in. */
    ramp(provider: string): void {
      const load = loadOf(provider)
      load.limit = Math.max(1, Math.ceil(max * policy.rampFrom))
      load.recent = []
      load.failed = 0
    },
    limitOf: (provider: string): number => Math.floor(loadOf(provider).limit),
    /**
     * How long a message turned away by a full limit waits: about as long as the provider needs to
     * free the room it lacks (longer the lower its limit), jittered, so a backlog is not claimed
     * and put back over and over.
     */
    backoffMs(provider: string): number {
      const ratio = max / Math.max(1, Math.floor(loadOf(provider).limit))
      const ms = Math.min(policy.maxBackoffMs, 1_000 * ratio)
      return Math.round(ms * (0.5 + 0.5 * Math.min(1, Math.max(0, policy.random()))))
    },
  }
}
