import { monitorEventLoopDelay } from 'node:perf_hooks'
import {
  claimRequestOf,
  deferClaimed,
  heldBySendCaps,
  logSettled,
  reportRecorded,
  routeClaims,
  sendClaimed,
  suppressedClaims,
  type DeliveryDeps,
  type DeliveryJob,
  type PendingRecord,
} from '../../jobs/deliver.ts'
import { describeError } from '../logging/logger.ts'
import { inSpan } from '../logging/trace-context.ts'
import { groupCommit } from './group-commit.ts'
import { claimMessages } from '../outbox/claim.ts'
import { QUEUES, type Channel, type DeliveryJobData } from '../outbox/constants.ts'
import { recordOutcomesEach, type Recorded } from '../outbox/record.ts'
import type { Route } from '../outbox/provider-health.ts'

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
  /** No new fetches; resolves once every send in flight has finished and its outcome is recorded. */
  stop(): Promise<void>
  /** Jobs fetched and not yet settled (tests, metrics). */
  readonly inFlight: number
}

/**
 * The worker's delivery loop, three decoupled steps (issue 16):
 *
 * - **fetch and claim** whenever slots are free: `boss.fetch` of up to the free slots, then one
 *   claim statement for what came back; the next fetch does not wait for those sends;
 * - **send** each claimed message on its own (`sendClaimed`: open, render, send, classify);
 * - **record** outcomes in short group commits: whatever arrived within `groupWindowMs` shares one
 *   transaction (lease checked, jobs completed with their `{id, retryCount}` in the same commit);
 *   a group never waits for a send still in flight.
 *
 * A job whose claim or record fails even alone is failed back to pg-boss (its retry takes the lease
 * over); a crash leaves fetched jobs active until their lease expires. Deferred jobs this worker
 * knows of (a retry it scheduled, the end of a channel pause) wake it when due instead of at the
 * next poll.
 */
export function startDeliveryPipeline(deps: DeliveryDeps, options: PipelineOptions): DeliveryPipeline {
  const concurrency = Math.max(1, options.concurrency)
  const minFetch = Math.max(1, Math.min(concurrency, options.minFetch ?? Math.floor(concurrency / 8)))
  const pollMs = options.pollMs ?? 2_000
  const { logger, boss } = deps
  const queue = QUEUES.delivery

  // Slots: `sending` sends in flight (at most `concurrency`); `ready` claimed messages waiting for
  // one; `claiming` jobs fetched and being claimed; `held` every job fetched and not yet settled
  // (recording included). A send slot is freed when its send returns, not when it is recorded, so
  // the record's round trips never cost provider concurrency; `prefetch` claimed messages wait
  // ready so a freed slot starts its next send at once, without waiting for a fetch and a claim.
  let sending = 0
  let claiming = 0
  let held = 0
  const ready: (() => void)[] = []
  // At most `concurrency` ready: a ready message waits for at most one round of the sends ahead of
  // it (each ends within SEND_TIMEOUT_MS), then sends within SEND_TIMEOUT_MS itself, which is what
  // the config's LEASE_SECONDS ≥ 2 × SEND_TIMEOUT_MS + 5 s keeps inside the lease.
  const prefetch = Math.max(1, Math.min(concurrency, options.prefetch ?? concurrency))
  const maxHeld = 4 * concurrency + prefetch
  let stopping = false
  /** A fetch may find jobs: set by a wake-up, the poll, a due timer, or a fetch that came back full. */
  let wanted = true
  let signal: (() => void) | undefined
  const tasks = new Set<Promise<void>>()
  const track = (task: Promise<void>) => {
    tasks.add(task)
    void task.finally(() => tasks.delete(task))
  }
  const kick = () => {
    const resolve = signal
    signal = undefined
    resolve?.()
  }
  const wake = () => {
    wanted = true
    kick()
  }
  const sendSlot = () =>
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
    })
  const sendDone = () => {
    account()
    sending -= 1
    ready.shift()?.()
    kick()
  }
  // Counters for the log line at stop (and bench/README.md): how busy the send slots were, and why not.
  const stats = {
    fetches: 0,
    fetched: 0,
    fetchMs: 0,
    claimMs: 0,
    commits: 0,
    recorded: 0,
    recordMs: 0,
    busySlotMs: 0,
    starvedMs: 0,
    since: performance.now(),
    last: performance.now(),
  }
  const account = () => {
    const now = performance.now()
    stats.busySlotMs += sending * (now - stats.last)
    if (sending < concurrency && ready.length === 0) stats.starvedMs += now - stats.last
    stats.last = now
  }
  // Event-loop delay: a send slot is busy from the worker's side until its answer is handled, so a
  // starved process shows here (the bench's figures are read against it).
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const room = () => Math.min(concurrency + prefetch - (claiming + ready.length + sending), maxHeld - held)

  // The earliest deferred job this worker knows of: one timer, re-armed when an earlier one appears.
  let dueTimer: NodeJS.Timeout | undefined
  let dueAt = Infinity
  const noteDue = (at: Date) => {
    const when = at.getTime()
    if (stopping || when >= dueAt) return
    if (dueTimer) clearTimeout(dueTimer)
    dueAt = when
    // pg-boss compares start_after with the database's clock (real time, whatever clock the
    // worker was given): a few ms late rather than early.
    dueTimer = setTimeout(
      () => {
        dueTimer = undefined
        dueAt = Infinity
        wake()
      },
      Math.max(0, when - Date.now()) + 5,
    )
    dueTimer.unref()
  }

  const recorder = groupCommit<PendingRecord, Recorded>(
    async (entries) => {
      const started = performance.now()
      try {
        return await recordOutcomesEach(deps.db, boss, deps.settings, entries, deps.clock(), logger)
      } finally {
        stats.commits += 1
        stats.recorded += entries.length
        stats.recordMs += performance.now() - started
      }
    },
    { windowMs: options.groupWindowMs ?? 2, maxGroup: options.maxGroup ?? 128, maxCommits: options.maxCommits ?? 2 },
  )

  // A THROTTLED answer with a Retry-After pauses its channel for the fleet once recorded; until then,
  // and for messages claimed before the pause existed, this worker holds back its own sends on that
  // channel. Once recorded, the database's pause (after any cap) replaces the provider's figure.
  const localPauses = new Map<Channel, number>()
  const pausedLocally = (channel: Channel) => (localPauses.get(channel) ?? 0) > Date.now()
  // Likewise the outage hold: a message routed to a provider at its claim may wait for a send slot
  // behind sends that hang until SEND_TIMEOUT_MS; if the provider was held down meanwhile (as this
  // worker recorded it, or its next batch read it), the message is put back without an attempt,
  // and its next claim fails it over or holds it. Only its probe still goes.
  const downLocally = new Set<string>()
  const heldLocally = (route: Route | undefined) => route?.kind === 'send' && !route.probe && downLocally.has(route.provider)

  const failedBack = new Set<DeliveryJob>()
  const failJob = async (job: DeliveryJob, error: unknown, what: string) => {
    failedBack.add(job)
    logger.error(`delivery could not be ${what}; pg-boss retries the job`, { messageId: job.data.messageId, ...describeError(error) })
    // Best effort: if this fails too (the database is away), the job's lease expires into a retry.
    await boss.fail(queue, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
  }

  /** One job from claim to settlement; its slot is freed at the end whatever happened. */
  const settleOne = async (
    job: DeliveryJob,
    claim: Awaited<ReturnType<typeof claimMessages>>[number],
    suppressed: boolean,
    capped: Date | undefined,
    route: Route | undefined,
  ) => {
    try {
      const request = claimRequestOf(job)
      if (claim.kind === 'failed') return await failJob(job, claim.error, 'claimed')
      if (claim.kind === 'settled') {
        logSettled(deps, request, claim)
        if (claim.nextAttemptAt) noteDue(claim.nextAttemptAt)
        return
      }
      await sendSlot()
      let entry: PendingRecord
      try {
        entry = capped
          ? deferClaimed(request, claim, capped)
          : route?.kind === 'held'
            ? deferClaimed(request, claim, route.until, route.providers)
            : (pausedLocally(claim.message.channel) || heldLocally(route)) && !suppressed
              ? deferClaimed(request, claim)
              : await inSpan(
                  `deliver ${claim.message.channel}`,
                  {
                    kind: 'consumer',
                    parent: job.data.traceparent,
                    attributes: { 'sealpost.message_id': request.messageId, 'sealpost.purpose': claim.message.purpose },
                  },
                  () => sendClaimed(deps, request, claim, suppressed, route),
                )
      } finally {
        sendDone()
      }
      const { channel } = claim.message
      const { outcome } = entry
      const throttled =
        outcome.kind === 'failed' &&
        outcome.failureClass === 'THROTTLED' &&
        outcome.retryAfterAt !== null &&
        outcome.retryAfterAt.getTime() > Date.now()
      if (throttled) localPauses.set(channel, Math.max(localPauses.get(channel) ?? 0, outcome.retryAfterAt!.getTime()))
      let result: Recorded
      try {
        result = await recorder.add(entry)
      } catch (error) {
        if (throttled) localPauses.delete(channel)
        return await failJob(job, error, 'recorded')
      }
      if (throttled) {
        const recorded = 'channelPausedUntil' in result ? result.channelPausedUntil : undefined
        if (recorded) localPauses.set(channel, recorded.getTime())
        else localPauses.delete(channel)
      }
      reportRecorded(deps, entry, result)
      if (result.kind === 'retry_scheduled' || result.kind === 'deferred') noteDue(result.nextAttemptAt)
      for (const transition of result.transitions ?? []) {
        if (transition.to === 'down') downLocally.add(transition.provider)
        if (transition.to === 'up') {
          downLocally.delete(transition.provider)
          // A provider is back and its held messages were called back: fetch them now, not at the next poll.
          wake()
        }
      }
      // Nothing was recorded for this attempt: if it is still ours (the message went final under
      // us, e.g. superseded), settle the job; if the attempt lapsed this touches nothing.
      if (result.kind === 'lease_lost') await boss.complete(queue, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
    } catch (error) {
      logger.error('delivery step failed unexpectedly', { messageId: job.data.messageId, ...describeError(error) })
    } finally {
      held -= 1
      kick()
    }
  }

  const claimAndSend = async (jobs: DeliveryJob[]) => {
    let claims: Awaited<ReturnType<typeof claimMessages>>
    let suppressed = new Set<string>()
    let capped = new Map<string, Date>()
    let routes = new Map<string, Route>()
    const started = performance.now()
    try {
      claims = await claimMessages(deps.db, boss, jobs.map(claimRequestOf), deps.clock())
      // Before any send: destinations on the suppression list are dead-lettered, never sent to.
      suppressed = await suppressedClaims(deps, claims)
      // Then the fleet's send caps: one counter statement per capped channel (and country) and batch.
      capped = await heldBySendCaps(deps, claims, suppressed)
      // Then each message's provider: failover, and the outage hold (one read of the providers' states).
      routes = await routeClaims(
        deps,
        claims,
        (id) => suppressed.has(id) || capped.has(id),
        (down) => {
          downLocally.clear()
          for (const provider of down) downLocally.add(provider)
        },
      )
      stats.claimMs += performance.now() - started
    } catch (error) {
      claims = jobs.map(() => ({ kind: 'failed', error }))
    } finally {
      claiming -= jobs.length
    }
    await Promise.all(
      jobs.map((job, index) => {
        const claim = claims[index]!
        if (claim.kind !== 'claimed') return settleOne(job, claim, false, undefined, undefined)
        return settleOne(job, claim, suppressed.has(claim.message.id), capped.get(claim.message.id), routes.get(claim.message.id))
      }),
    )
  }

  const pause = (ms: number) =>
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
    })

  // How many jobs a fetch asks for: twice what the last one found (at least `minFetch`), doubled
  // again after each full one, never more than there is room for. pg-boss plans its fetch for the
  // LIMIT asked: asking 128 of a queue holding one due job planned a hash join over every job the
  // queue still keeps, completed ones included (2–3 ms a fetch at 6 600 kept jobs, a fetch per
  // message at 100 msg/s; bench/README.md), where asking for a few plans index lookups.
  let ask = minFetch
  let lastFetch = 0
  const loop = async () => {
    while (!stopping) {
      const free = room()
      const sincePoll = performance.now() - lastFetch
      // The poll floor counts from the last fetch, so a busy worker's slot releases never postpone it.
      if (sincePoll >= pollMs) wanted = true
      // Fetch for enough free slots at once: fewer, fuller fetches.
      if (!wanted || free < minFetch) {
        await pause(wanted ? pollMs : pollMs - sincePoll)
        continue
      }
      wanted = false
      lastFetch = performance.now()
      let jobs: DeliveryJob[]
      const batchSize = Math.min(free, ask)
      try {
        const started = performance.now()
        jobs = await boss.fetch<DeliveryJobData>(queue, { batchSize })
        stats.fetches += 1
        stats.fetched += jobs.length
        stats.fetchMs += performance.now() - started
      } catch (error) {
        logger.error('delivery fetch failed; retrying in 1 s', describeError(error))
        await pause(1_000)
        wanted = true
        continue
      }
      // A full batch: more are probably waiting.
      if (jobs.length >= batchSize) wanted = true
      ask = jobs.length >= batchSize ? Math.min(concurrency + prefetch, 2 * batchSize) : Math.max(minFetch, 2 * jobs.length)
      if (jobs.length === 0) continue
      claiming += jobs.length
      held += jobs.length
      track(claimAndSend(jobs))
    }
  }
  const looping = options.fetch === false ? Promise.resolve() : loop()

  return {
    wake,
    async run(jobs) {
      claiming += jobs.length
      held += jobs.length
      await claimAndSend([...jobs])
      return { failedBack: jobs.filter((job) => failedBack.has(job)) }
    },
    get inFlight() {
      return held
    },
    async stop() {
      stopping = true
      kick()
      if (dueTimer) clearTimeout(dueTimer)
      await looping
      while (tasks.size > 0) await Promise.allSettled([...tasks])
      await recorder.drain()
      account()
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
    },
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
