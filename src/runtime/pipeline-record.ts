import type { DeliveryDeps, PendingRecord } from '../../jobs/delivery-deps.ts'
import type { Recorded } from '../outbox/outcomes.ts'
import type { ProviderHealth } from '../outbox/provider-health.ts'
import type { Route } from '../outbox/provider-route.ts'
import { recordOutcomesEach } from '../outbox/record.ts'
import { groupCommit } from './group-commit.ts'
import type { PipelineStats } from './pipeline-slots.ts'
import type { ProviderLimits } from './provider-limits.ts'

/**
 * Outcomes recorded in short group commits: whatever arrived within `windowMs` shares one
 * transaction (lease checked, jobs completed with their `{id, retryCount}` in the same commit); a
 * group never waits for a send still in flight.
 */
export function pipelineRecorder(
  deps: DeliveryDeps,
  stats: PipelineStats,
  options: { windowMs?: number; maxGroup?: number; maxCommits?: number },
) {
  return groupCommit<PendingRecord, Recorded>(
    async (entries) => {
      const started = performance.now()
      try {
        return await recordOutcomesEach(deps.db, deps.boss, deps.settings, entries, deps.clock(), deps.logger)
      } finally {
        stats.commits += 1
        stats.recorded += entries.length
        stats.recordMs += performance.now() - started
      }
    },
    { windowMs: options.windowMs ?? 2, maxGroup: options.maxGroup ?? 128, maxCommits: options.maxCommits ?? 2 },
  )
}

export type LocalView = ReturnType<typeof localView>

/**
 * What this worker learnt before the fleet's record says so.
 *
 * A THROTTLED answer with a Retry-After pauses its provider for the fleet once recorded; until
 * then, and for messages claimed before the pause existed, this worker holds back its own sends to
 * that provider. Once recorded, the database's pause (after any cap) replaces the provider's figure.
 *
 * Likewise the breaker: a message routed to a provider at its claim may wait for a send slot
 * behind sends that hang until SEND_TIMEOUT_MS; if the provider was held down meanwhile (as this
 * worker recorded it, or its next batch read it), the message is put back without an attempt,
 * and its next claim fails it over or holds it. Only its probes still go. A provider whose hold
 * lifted ramps back up in this worker's limits (src/runtime/provider-limits.ts).
 */
export function localView(wake: () => void, limits: Pick<ProviderLimits, 'ramp'>) {
  const pauses = new Map<string, number>()
  const down = new Set<string>()
  const lifted = (provider: string) => {
    down.delete(provider)
    limits.ramp(provider)
  }
  return {
    /** A send now would go to a provider paused here or held down here. */
    holdsBack: (route: Route | undefined) =>
      route?.kind === 'send' && ((pauses.get(route.provider) ?? 0) > Date.now() || (!route.probe && down.has(route.provider))),
    /** The providers' states as the last routing read them. */
    statesAre: (states: ReadonlyMap<string, ProviderHealth>) => {
      for (const provider of down) if (states.get(provider)?.state !== 'down') lifted(provider)
      for (const [provider, health] of states) if (health.state === 'down') down.add(provider)
    },
    /** A THROTTLED outcome with a future Retry-After pauses its provider here at once (never one about one recipient); its id if it did. */
    throttledBy(entry: PendingRecord): string | undefined {
      const { outcome } = entry
      const throttled =
        outcome.kind === 'failed' &&
        outcome.failureClass === 'THROTTLED' &&
        outcome.recipientOnly !== true &&
        outcome.provider !== undefined &&
        outcome.retryAfterAt !== null &&
        outcome.retryAfterAt.getTime() > Date.now()
      if (!throttled) return undefined
      const provider = outcome.provider!.id
      pauses.set(provider, Math.max(pauses.get(provider) ?? 0, outcome.retryAfterAt!.getTime()))
      return provider
    },
    /** The record of a throttled outcome failed: the pause is not the fleet's, nor this worker's. */
    unthrottle(provider: string) {
      pauses.delete(provider)
    },
    /** What the record said: the fleet's pause of a throttled provider, providers gone down or back up. */
    learn(throttled: string | undefined, result: Recorded) {
      if (throttled) {
        const recorded = 'pausedUntil' in result ? result.pausedUntil : undefined
        if (recorded) pauses.set(throttled, recorded.getTime())
        else pauses.delete(throttled)
      }
      for (const transition of result.transitions ?? []) {
        if (transition.to === 'down') down.add(transition.provider)
        if (transition.to === 'up') {
          lifted(transition.provider)
          // A provider is back and its held messages were called back: fetch them now, not at the next poll.
          wake()
        }
      }
    },
  }
}
