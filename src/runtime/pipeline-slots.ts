import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { Logger } from '../logging/logger.ts'

/** Counters for the log line at stop (and docs/performance.md): how busy the send slots were, and why not. */
export type PipelineStats = {
  fetches: number
  fetched: number
  fetchMs: number
  claimMs: number
  commits: number
  recorded: number
  recordMs: number
  busySlotMs: number
  starvedMs: number
  since: number
  last: number
}

export type Slots = ReturnType<typeof createSlots>

/**
 * The pipeline's slots: `sending` sends in flight (at most `concurrency`); `ready` claimed messages
 * waiting for one; `claiming` jobs fetched and being claimed; `held` every job fetched and not yet
 * settled (recording included). A send slot is freed when its send returns, not when it is
 * recorded, so the record's round trips never cost provider concurrency; `prefetch` claimed
 * messages wait ready so a freed slot starts its next send at once, without waiting for a fetch and
 * a claim. `onFree` runs whenever a slot or a hold is released (the fetch loop may have room).
 */
export function createSlots(concurrency: number, prefetch: number, onFree: () => void) {
  let sending = 0
  let claiming = 0
  let held = 0
  const ready: (() => void)[] = []
  const maxHeld = 4 * concurrency + prefetch
  const now = performance.now()
  const stats: PipelineStats = {
    fetches: 0,
    fetched: 0,
    fetchMs: 0,
    claimMs: 0,
    commits: 0,
    recorded: 0,
    recordMs: 0,
    busySlotMs: 0,
    starvedMs: 0,
    since: now,
    last: now,
  }
  const account = () => {
    const at = performance.now()
    stats.busySlotMs += sending * (at - stats.last)
    if (sending < concurrency && ready.length === 0) stats.starvedMs += at - stats.last
    stats.last = at
  }
  return {
    stats,
    account,
    /** Jobs a fetch (or `run`) handed over: held until settled, claiming until their claim returns. */
    fetched(count: number) {
      claiming += count
      held += count
    },
    claimed(count: number) {
      claiming -= count
    },
    settled() {
      held -= 1
      onFree()
    },
    /** How many more jobs a fetch may take. */
    room: () => Math.min(concurrency + prefetch - (claiming + ready.length + sending), maxHeld - held),
    get held() {
      return held
    },
    /** Resolves once a send slot is this caller's; `release` gives it back. */
    acquire: () =>
      new Promise<void>((resolve) => {
        account()
        if (sending < concurrency) {
          sending += 1
          resolve()
        } else {
          ready.push(() => {
            sending += 1
            resolve()
          })
        }
      }),
    release() {
      account()
      sending -= 1
      ready.shift()?.()
      onFree()
    },
  }
}

/**
 * Event-loop delay: a send slot is busy from the worker's side until its answer is handled, so a
 * starved process shows here (the benchmark's figures are read against it). `report` logs the
 * summary once, at stop.
 */
export function pipelineReport(slots: Slots, logger: Logger) {
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  return () => {
    const { stats } = slots
    slots.account()
    const seconds = (performance.now() - stats.since) / 1000
    const round = (value: number) => Math.round(value * 10) / 10
    logger.info('delivery pipeline stopped', {
      seconds: round(seconds),
      meanSending: round(stats.busySlotMs / 1000 / seconds),
      starvedShare: round(stats.starvedMs / 1000 / seconds),
      fetches: stats.fetches,
      meanFetch: round(stats.fetched / Math.max(1, stats.fetches)),
      meanFetchMs: round(stats.fetchMs / Math.max(1, stats.fetches)),
      meanClaimMs: round(stats.claimMs / Math.max(1, stats.fetches)),
      commits: stats.commits,
      meanGroup: round(stats.recorded / Math.max(1, stats.commits)),
      meanCommitMs: round(stats.recordMs / Math.max(1, stats.commits)),
      // The histogram holds whole sampling intervals: minus the 10 ms resolution, the lateness.
      eventLoopLagP50Ms: round(Math.max(0, loopDelay.percentile(50) / 1e6 - 10)),
      eventLoopLagP99Ms: round(Math.max(0, loopDelay.percentile(99) / 1e6 - 10)),
    })
    loopDelay.disable()
  }
}
