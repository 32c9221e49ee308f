import type { DeliveryDeps, DeliveryJob } from '../../jobs/delivery-deps.ts'
import { describeError } from '../logging/logger.ts'
import { QUEUES, type DeliveryJobData } from '../outbox/constants.ts'
import { localView, pipelineRecorder } from './pipeline-record.ts'
import { createSlots, pipelineReport, type Slots } from './pipeline-slots.ts'
import { deliveryStep } from './pipeline-step.ts'
import { providerLimits } from './provider-limits.ts'

/** How the pipeline paces itself (docs/delivery.md "Delivery settings"). */
export type PipelineOptions = {
  /** Sends in flight at most: WORKER_CONCURRENCY. */
  concurrency: number
  /** Claimed messages kept ready for the next free send slot (default a quarter of `concurrency`). */
  prefetch?: number
  /** Fetch only once there is room for this many jobs: fewer, fuller fetches. */
  minFetch?: number
  /** The floor when no notification arrives: a fetch at least this often while slots are free. */
  pollMs?: number
  /** Outcomes arriving within this window share one record transaction. */
  groupWindowMs?: number
  /** Outcomes per record transaction at most. */
  maxGroup?: number
  /** Record transactions in flight at once; outcomes arriving meanwhile form the next group. */
  maxCommits?: number
  /** False: no fetch loop; jobs come only through `run` (`runOnce`). Default true. */
  fetch?: boolean
}

export type DeliveryPipeline = {
  /** Fetch now (a NOTIFY arrived, a deferred job fell due). */
  wake(): void
  /**
   * These jobs, already fetched, through claim → send → record as any fetch's jobs go; resolves
   * once each is settled, with the jobs that were failed back to pg-boss (their claim or record
   * failed even alone).
   */
  run(jobs: readonly DeliveryJob[]): Promise<{ failedBack: DeliveryJob[] }>
  /**
   * No new fetches; resolves once every send in flight (from a fetch or a `run`) has finished and
   * its outcome is recorded.
   */
  stop(): Promise<void>
  /** Jobs fetched and not yet settled (tests, metrics). */
  readonly inFlight: number
}

/**
 * The worker's delivery loop, three decoupled steps:
 *
 * - **fetch and claim** whenever slots are free: `boss.fetch` of up to the free slots, then one
 *   claim statement for what came back; the next fetch does not wait for those sends;
 * - **send** each claimed message on its own (`sendClaimed`: open, render, send, classify);
 * - **record** outcomes in short group commits (src/runtime/pipeline-record.ts).
 *
 * A job whose claim or record fails even alone is failed back to pg-boss (its retry takes the lease
 * over); a crash leaves fetched jobs active until their lease expires. Deferred jobs this worker
 * knows of (a retry it scheduled, the end of a channel pause) wake it when due instead of at the
 * next poll.
 */
export function startDeliveryPipeline(deps: DeliveryDeps, options: PipelineOptions): DeliveryPipeline {
  const concurrency = Math.max(1, options.concurrency)
  // At most `concurrency` ready: a ready message waits for at most one round of the sends ahead of
  // it (each ends within SEND_TIMEOUT_MS), then sends within SEND_TIMEOUT_MS itself, which is what
  // the config's LEASE_SECONDS ≥ 2 × SEND_TIMEOUT_MS + 5 s keeps inside the lease.
  const prefetch = Math.max(1, Math.min(concurrency, options.prefetch ?? concurrency))
  const state = { stopping: false, wanted: true }
  const waits = waiter()
  const wake = () => {
    state.wanted = true
    waits.kick()
  }
  const slots = createSlots(concurrency, prefetch, waits.kick)
  const report = pipelineReport(slots, deps.logger)
  const due = dueTimer(wake, () => state.stopping)
  const recorder = pipelineRecorder(deps, slots.stats, {
    windowMs: options.groupWindowMs,
    maxGroup: options.maxGroup,
    maxCommits: options.maxCommits,
  })
  // Per provider, this worker's in-flight limit below the breaker's threshold: back off by concurrency, not by stopping.
  const limits = providerLimits(concurrency)
  const step = deliveryStep(deps, { slots, recorder, local: localView(wake, limits), limits, noteDue: due.note })
  // Every batch under way, whichever entry handed it over: a stop waits for each to be recorded,
  // so a send that left before the stop is never sent again after it.
  const tasks = new Set<Promise<void>>()
  const dispatch = (jobs: DeliveryJob[]) => {
    const task = step.claimAndSend(jobs)
    tasks.add(task)
    void task.finally(() => tasks.delete(task))
    return task
  }
  const looping =
    options.fetch === false ? Promise.resolve() : fetchLoop(deps, { ...options, concurrency, prefetch }, { state, waits, slots }, dispatch)

  return {
    wake,
    async run(jobs) {
      slots.fetched(jobs.length)
      await dispatch([...jobs])
      return { failedBack: jobs.filter((job) => step.failedBack.has(job)) }
    },
    get inFlight() {
      return slots.held
    },
    async stop() {
      state.stopping = true
      waits.kick()
      due.cancel()
      await looping
      while (tasks.size > 0) await Promise.allSettled([...tasks])
      await recorder.drain()
      report()
    },
  }
}

/** Where the fetch loop waits: `pause` until a timeout or a `kick`, whichever comes first. */
export function waiter() {
  let signal: (() => void) | undefined
  return {
    kick: () => {
      const resolve = signal
      signal = undefined
      resolve?.()
    },
    pause: (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(
          () => {
            if (signal === done) signal = undefined
            resolve()
          },
          Math.max(1, ms),
        )
        const done = () => {
          clearTimeout(timer)
          resolve()
        }
        signal = done
      }),
  }
}

/** The earliest deferred job this worker knows of: one timer, re-armed when an earlier one appears. */
function dueTimer(wake: () => void, stopping: () => boolean) {
  let timer: NodeJS.Timeout | undefined
  let dueAt = Infinity
  return {
    note: (at: Date) => {
      const when = at.getTime()
      if (stopping() || when >= dueAt) return
      if (timer) clearTimeout(timer)
      dueAt = when
      // pg-boss compares start_after with the database's clock (real time, whatever clock the
      // worker was given): a few ms late rather than early.
      timer = setTimeout(
        () => {
          timer = undefined
          dueAt = Infinity
          wake()
        },
        Math.max(0, when - Date.now()) + 5,
      )
      timer.unref()
    },
    cancel() {
      if (timer) clearTimeout(timer)
    },
  }
}

/**
 * Fetches while not stopping, for enough free slots at once (fewer, fuller fetches), and hands
 * each batch to `dispatch` without waiting for it.
 *
 * How many jobs a fetch asks for: twice what the last one found (at least `minFetch`), doubled
 * again after each full one, never more than there is room for. pg-boss plans its fetch for the
 * LIMIT asked: asking 128 of a queue holding one due job planned a hash join over every job the
 * queue still keeps, completed ones included, where asking for a few plans index lookups.
 */
async function fetchLoop(
  deps: Pick<DeliveryDeps, 'boss' | 'logger'>,
  options: PipelineOptions & { prefetch: number },
  { state, waits, slots }: { state: { stopping: boolean; wanted: boolean }; waits: ReturnType<typeof waiter>; slots: Slots },
  dispatch: (jobs: DeliveryJob[]) => Promise<void>,
): Promise<void> {
  const { concurrency, prefetch } = options
  const minFetch = Math.max(1, Math.min(concurrency, options.minFetch ?? Math.floor(concurrency / 8)))
  const pollMs = options.pollMs ?? 2_000
  let ask = minFetch
  let lastFetch = 0
  while (!state.stopping) {
    const free = slots.room()
    const sincePoll = performance.now() - lastFetch
    // The poll floor counts from the last fetch, so a busy worker's slot releases never postpone it.
    if (sincePoll >= pollMs) state.wanted = true
    if (!state.wanted || free < minFetch) {
      await waits.pause(state.wanted ? pollMs : pollMs - sincePoll)
      continue
    }
    state.wanted = false
    lastFetch = performance.now()
    let jobs: DeliveryJob[]
    const batchSize = Math.min(free, ask)
    try {
      const started = performance.now()
      jobs = await deps.boss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize })
      slots.stats.fetches += 1
      slots.stats.fetched += jobs.length
      slots.stats.fetchMs += performance.now() - started
    } catch (error) {
      deps.logger.error('delivery fetch failed; retrying in 1 s', describeError(error))
      await waits.pause(1_000)
      state.wanted = true
      continue
    }
    // A full batch: more are probably waiting.
    if (jobs.length >= batchSize) state.wanted = true
    ask = jobs.length >= batchSize ? Math.min(concurrency + prefetch, 2 * batchSize) : Math.max(minFetch, 2 * jobs.length)
    if (jobs.length === 0) continue
    slots.fetched(jobs.length)
    void dispatch(jobs)
  }
}

/**
 * The pipeline's deterministic entry (graphile-worker's `runOnce`): the given jobs, fetched by the
 * caller (tests fetch with `ignoreStartAfter` and move an injected clock), go through the very
 * steps the running worker takes — claim, suppression, send caps, routing, send, group-commit
 * record — on a pipeline that does not fetch, which then stops once they are settled.
 */
export async function runOnce(
  deps: DeliveryDeps,
  jobs: readonly DeliveryJob[],
  options: Omit<PipelineOptions, 'fetch' | 'concurrency'> & { concurrency?: number } = {},
): Promise<{ failedBack: DeliveryJob[] }> {
  const pipeline = startDeliveryPipeline(deps, { concurrency: Math.max(1, jobs.length), ...options, fetch: false })
  try {
    return await pipeline.run(jobs)
  } finally {
    await pipeline.stop()
  }
}
