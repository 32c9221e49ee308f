import type { DeliveryDeps, PendingRecord } from '../../jobs/deliver.ts'
import type { Channel } from '../outbox/constants.ts'
import type { Route } from '../outbox/provider-health.ts'
import { recordOutcomesEach, type Recorded } from '../outbox/record.ts'
import { groupCommit } from './group-commit.ts'
import type { PipelineStats } from './pipeline-slots.ts'

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
 * A THROTTLED answer with a Retry-After pauses its channel for the fleet once recorded; until then,
 * and for messages claimed before the pause existed, this worker holds back its own sends on that
 * channel. Once recorded, the database's pause (after any cap) replaces the provider's figure.
 *
 * Likewise the outage hold: a message routed to a provider at its claim may wait for a send slot
 * behind sends that hang until SEND_TIMEOUT_MS; if the provider was held down meanwhile (as this
 * worker recorded it, or its next batch read it), the message is put back without an attempt,
 * and its next claim fails it over or holds it. Only its probe still goes.
 */
export function localView(wake: () => void) {
  const pauses = new Map<Channel, number>()
  const down = new Set<string>()
  return {
    /** A send now would go to a channel paused here or a provider held down here. */
    holdsBack: (channel: Channel, route: Route | undefined) =>
      (pauses.get(channel) ?? 0) > Date.now() || (route?.kind === 'send' && !route.probe && down.has(route.provider)),
    /** The providers the last routing read as down. */
    downAre: (providers: Iterable<string>) => {
      down.clear()
      for (const provider of providers) down.add(provider)
    },
    /** A THROTTLED outcome with a future Retry-After pauses its channel here at once (never one about one recipient); true if it did. */
    throttledBy(channel: Channel, entry: PendingRecord): boolean {
      const { outcome } = entry
      const throttled =
        outcome.kind === 'failed' &&
        outcome.failureClass === 'THROTTLED' &&
        outcome.recipientOnly !== true &&
        outcome.retryAfterAt !== null &&
        outcome.retryAfterAt.getTime() > Date.now()
      if (throttled) pauses.set(channel, Math.max(pauses.get(channel) ?? 0, outcome.retryAfterAt!.getTime()))
      return throttled
    },
    /** The record of a throttled outcome failed: the pause is not the fleet's, nor this worker's. */
    unthrottle(channel: Channel) {
      pauses.delete(channel)
    },
    /** What the record said: the fleet's pause of a throttled channel, providers gone down or back up. */
    learn(channel: Channel, throttled: boolean, result: Recorded) {
      if (throttled) {
        const recorded = 'channelPausedUntil' in result ? result.channelPausedUntil : undefined
        if (recorded) pauses.set(channel, recorded.getTime())
        else pauses.delete(channel)
      }
      for (const transition of result.transitions ?? []) {
        if (transition.to === 'down') down.add(transition.provider)
        if (transition.to === 'up') {
          down.delete(transition.provider)
          // A provider is back and its held messages were called back: fetch them now, not at the next poll.
          wake()
        }
      }
    },
  }
}
