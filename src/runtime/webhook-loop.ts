import { fromKnex, type Job } from 'pg-boss'
import {
  claimWebhookJobsTx,
  recordWebhookOutcomes,
  sendWebhook,
  type ClaimedJob,
  type PendingWebhookRecord,
  type WebhookDeliverDeps,
  type WebhookJobData,
  type WebhookJobOutcome,
} from '../../jobs/webhook-deliver.ts'
import { QUEUES } from '../db/queues.ts'
import { describeError } from '../logging/logger.ts'
import { waiter } from './delivery-pipeline.ts'
import { groupCommit } from './group-commit.ts'

/** How the events-out loop paces itself (docs/events.md "Delivery"). */
export type WebhookLoopOptions = {
  /** Deliveries in flight in this worker at most. */
  concurrency: number
  /** Deliveries of one endpoint in flight across the fleet at most (pg-boss group concurrency). */
  groupConcurrency: number
  /** A fetch at least this often while slots are free: retries that came due, wake-ups missed. */
  pollMs: number
  /** False: no fetch loop; jobs come only through `run` (`runWebhookJobsOnce`). Default true. */
  fetch?: boolean
}

/** What a job came to; `failed`: its handling threw, and the job went back to pg-boss for a retry. */
export type WebhookRunOutcome = WebhookJobOutcome | 'failed'

export type WebhookLoop = {
  /** A `webhook-delivery` job was sent (pg-boss's NOTIFY for the queue): fetch now. */
  wake: () => void
  /** These jobs, already fetched, claimed, sent and recorded as a fetch's are; resolves with each one's outcome. */
  run: (jobs: readonly Job<WebhookJobData>[]) => Promise<WebhookRunOutcome[]>
  /** No new fetches; resolves once every delivery in flight is sent and recorded. */
  stop: () => Promise<void>
}

/**
 * The worker's `webhook-delivery` loop. It fetches as many jobs as it has free slots and claims
 * their deliveries in the fetch's own transaction, then sends each on its own, so a receiver
 * hanging until the send timeout holds its own slot only, never a batch; outcomes are recorded in
 * short group commits (whatever arrived within 2 ms shares one). It fetches again whenever a job
 * ends (its endpoint's group may have room now), when the queue's NOTIFY arrives (`wake`), and at
 * least every `pollMs`. pg-boss's `work()` would wait its polling interval after every batch (docs/architecture.md §8,
 * decisions 7 and 17). A job whose handling throws is failed back to pg-boss, whose retry sends again.
 */
export function startWebhookLoop(deps: WebhookDeliverDeps, options: WebhookLoopOptions): WebhookLoop {
  const state = { stopping: false, wanted: true, inFlight: 0 }
  const waits = waiter()
  const wake = () => {
    state.wanted = true
    waits.kick()
  }
  const recorder = groupCommit<PendingWebhookRecord, WebhookJobOutcome>((entries) => recordWebhookOutcomes(deps, entries), {
    windowMs: 2,
    maxGroup: 128,
    maxCommits: 2,
  })
  const running = new Set<Promise<WebhookRunOutcome>>()
  const handle = (claimed: ClaimedJob): Promise<WebhookRunOutcome> => {
    state.inFlight += 1
    const task = deliverClaimed(deps, claimed, (entry) => recorder.add(entry))
    running.add(task)
    void task.finally(() => {
      state.inFlight -= 1
      running.delete(task)
      wake()
    })
    return task
  }
  const loop = options.fetch === false ? Promise.resolve() : fetchLoop(deps, options, { state, waits }, handle)
  return {
    wake,
    async run(jobs) {
      const claimed = await deps.db.transaction((trx) => claimWebhookJobsTx(trx, jobs))
      return await Promise.all(claimed.map(handle))
    },
    async stop() {
      state.stopping = true
      wake()
      await loop
      while (running.size > 0) await Promise.allSettled([...running])
      await recorder.drain()
    },
  }
}

/** One claimed job: its send (if it owns a delivery), then its record; a throw fails the job back to pg-boss. */
async function deliverClaimed(
  deps: WebhookDeliverDeps,
  claimed: ClaimedJob,
  record: (entry: PendingWebhookRecord) => Promise<WebhookJobOutcome>,
): Promise<WebhookRunOutcome> {
  try {
    const sent = claimed.delivery ? await sendWebhook(deps, claimed.delivery) : undefined
    return await record({ ...claimed, ...(sent ? { record: sent } : {}) })
  } catch (error) {
    const { job } = claimed
    deps.logger.error('webhook delivery failed; pg-boss retries its job', { jobId: job.id, ...describeError(error) })
    await deps.boss.fail(QUEUES.webhookDelivery, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
    return 'failed'
  }
}

/**
 * Fetches while not stopping, for the free slots, whenever something may be fetchable (a wake, a
 * job that ended, a full fetch, the poll floor), and claims what came back in the fetch's own
 * transaction: one commit for the batch. Each claimed job goes to `handle` without waiting.
 */
async function fetchLoop(
  deps: WebhookDeliverDeps,
  options: WebhookLoopOptions,
  { state, waits }: { state: { stopping: boolean; wanted: boolean; inFlight: number }; waits: ReturnType<typeof waiter> },
  handle: (claimed: ClaimedJob) => Promise<WebhookRunOutcome>,
): Promise<void> {
  let lastFetch = 0
  while (!state.stopping) {
    const free = options.concurrency - state.inFlight
    const sincePoll = performance.now() - lastFetch
    if (sincePoll >= options.pollMs) state.wanted = true
    if (!state.wanted || free <= 0) {
      await waits.pause(options.pollMs - sincePoll)
      continue
    }
    state.wanted = false
    lastFetch = performance.now()
    try {
      const claimed = await deps.db.transaction(async (trx) => {
        const jobs = await deps.boss.fetch<WebhookJobData>(QUEUES.webhookDelivery, {
          batchSize: free,
          groupConcurrency: options.groupConcurrency,
          db: fromKnex(trx),
        })
        return await claimWebhookJobsTx(trx, jobs)
      })
      // A full fetch: more are probably waiting.
      if (claimed.length >= free) state.wanted = true
      for (const entry of claimed) void handle(entry)
    } catch (error) {
      deps.logger.error('webhook delivery fetch failed; retrying in 1 s', describeError(error))
      await waits.pause(1_000)
      state.wanted = true
    }
  }
}

/**
 * The loop's deterministic entry (graphile-worker's `runOnce`): jobs the caller fetched (tests move
 * an injected clock and the jobs' `start_after`) go through the very claim, send and group-commit
 * record the running worker uses, on a loop that does not fetch.
 */
export async function runWebhookJobsOnce(deps: WebhookDeliverDeps, jobs: readonly Job<WebhookJobData>[]): Promise<WebhookRunOutcome[]> {
  const loop = startWebhookLoop(deps, { concurrency: Math.max(1, jobs.length), groupConcurrency: 1, pollMs: 1_000, fetch: false })
  try {
    return await loop.run(jobs)
  } finally {
    await loop.stop()
  }
}
