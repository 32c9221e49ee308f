import { logSettled, reportRecorded, sendClaimed, suppressedClaims } from '../../jobs/deliver.ts'
import { heldBySendCaps } from '../../jobs/deliver-caps.ts'
import { deferClaimed } from '../../jobs/deliver-holds.ts'
import { routeClaims } from '../../jobs/deliver-routes.ts'
import { claimRequestOf, type DeliveryDeps, type DeliveryJob, type PendingRecord } from '../../jobs/delivery-deps.ts'
import { describeError } from '../logging/logger.ts'
import { inSpan } from '../logging/trace-context.ts'
import { claimMessages } from '../outbox/claim.ts'
import { QUEUES } from '../outbox/constants.ts'
import type { Recorded } from '../outbox/outcomes.ts'
import type { Route } from '../outbox/provider-route.ts'
import type { LocalView, pipelineRecorder } from './pipeline-record.ts'
import type { Slots } from './pipeline-slots.ts'
import { verdictOf, type ProviderLimits } from './provider-limits.ts'

type Claimed = Awaited<ReturnType<typeof claimMessages>>[number]
type ClaimedMessage = Extract<Claimed, { kind: 'claimed' }>

/** What one batch's step shares with the rest of the pipeline. */
export type StepContext = {
  slots: Slots
  recorder: ReturnType<typeof pipelineRecorder>
  local: LocalView
  /** This worker's in-flight limit per provider (src/runtime/provider-limits.ts). */
  limits: ProviderLimits
  /** A deferred job this worker knows of falls due at this time. */
  noteDue: (at: Date) => void
}

/** What the batch's checks decided for one claimed message. */
type Hold = { suppressed: boolean; capped?: Date; route?: Route }

/**
 * The step every fetched batch takes: one claim statement (then suppression, routing and send
 * caps for the whole batch), and each message on its own from there — a send slot, the send
 * (`sendClaimed`: open, render, send, classify), the group-commit record. A job whose claim or
 * record fails even alone is failed back to pg-boss (its retry takes the lease over); `failedBack`
 * names them.
 */
export function deliveryStep(deps: DeliveryDeps, context: StepContext) {
  const failedBack = new Set<DeliveryJob>()
  const failJob = async (job: DeliveryJob, error: unknown, what: string) => {
    failedBack.add(job)
    deps.logger.error(`delivery could not be ${what}; pg-boss retries the job`, { messageId: job.data.messageId, ...describeError(error) })
    // Best effort: if this fails too (the database is away), the job's lease expires into a retry.
    await deps.boss.fail(QUEUES.delivery, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
  }
  const settleOne = settleOneStep(deps, context, failJob)
  return {
    failedBack,
    /** Claims the batch and settles each of its jobs; resolves once every one is settled. */
    async claimAndSend(jobs: DeliveryJob[]) {
      const { claims, suppressed, capped, routes } = await claimBatch(deps, context, jobs)
      await Promise.all(
        jobs.map((job, index) => {
          const claim = claims[index]!
          if (claim.kind !== 'claimed') return settleOne(job, claim, { suppressed: false })
          const id = claim.message.id
          return settleOne(job, claim, { suppressed: suppressed.has(id), capped: capped.get(id), route: routes.get(id) })
        }),
      )
    },
  }
}

/** The batch's claim, then, before any send, what holds each message back. */
async function claimBatch(deps: DeliveryDeps, { slots, local }: StepContext, jobs: DeliveryJob[]) {
  const started = performance.now()
  try {
    const claims = await claimMessages(deps.db, deps.boss, jobs.map(claimRequestOf), deps.clock())
    // Before any send: destinations on the suppression list are dead-lettered, never sent to.
    const suppressed = await suppressedClaims(deps, claims)
    // Then each message's provider: failover, the phone fallback, pauses and the breaker (one read of the providers' states).
    const routes = await routeClaims(deps, claims, (id) => suppressed.has(id), local.statesAre)
    // Then the fleet's send caps, on the channel each route sends on: one counter statement per capped channel (and country) and batch.
    const capped = await heldBySendCaps(deps, claims, suppressed, routes)
    slots.stats.claimMs += performance.now() - started
    return { claims, suppressed, capped, routes }
  } catch (error) {
    const claims: Claimed[] = jobs.map(() => ({ kind: 'failed', error }))
    return { claims, suppressed: new Set<string>(), capped: new Map<string, Date>(), routes: new Map<string, Route>() }
  } finally {
    slots.claimed(jobs.length)
  }
}

/**
 * The claimed message sent, or deferred without an attempt: capped, held, paused or held down
 * here, or its provider at this worker's limit (back after a short back-off, so the worker's other
 * providers keep their slots).
 */
async function sendOrDefer(deps: DeliveryDeps, { local, limits }: StepContext, job: DeliveryJob, claim: ClaimedMessage, hold: Hold) {
  const request = claimRequestOf(job)
  const { route } = hold
  if (hold.capped) return deferClaimed(request, claim, { until: hold.capped })
  if (route?.kind === 'held') return deferClaimed(request, claim, { until: route.until, heldFor: route.providers })
  if (hold.suppressed || route === undefined) return await sendInSpan(deps, job, claim, hold)
  if (local.holdsBack(route)) return deferClaimed(request, claim, { pausedProvider: route.provider })
  // Probes are bounded by their lease, not by the limit: a provider held to a few slots is still tested.
  if (route.probe) return await sendInSpan(deps, job, claim, hold)
  if (!limits.tryAcquire(route.provider))
    return deferClaimed(request, claim, { until: new Date(deps.clock().getTime() + limits.backoffMs(route.provider)) })
  let entry: PendingRecord | undefined
  try {
    entry = await sendInSpan(deps, job, claim, hold)
    return entry
  } finally {
    limits.release(route.provider, entry ? verdictOf(entry) : 'neutral')
  }
}

/** The send inside its span, which continues the enqueue's trace (the job's traceparent). */
async function sendInSpan(deps: DeliveryDeps, job: DeliveryJob, claim: ClaimedMessage, hold: Hold): Promise<PendingRecord> {
  const request = claimRequestOf(job)
  return await inSpan(
    `deliver ${claim.message.channel}`,
    {
      kind: 'consumer',
      parent: job.data.traceparent,
      attributes: { 'sealpost.message_id': request.messageId, 'sealpost.purpose': claim.message.purpose },
    },
    () => sendClaimed(deps, request, claim, hold.suppressed, hold.route),
  )
}

/** One job from claim to settlement: a send slot, the send or deferral, the record; the hold released whatever happened. */
function settleOneStep(
  deps: DeliveryDeps,
  context: StepContext,
  failJob: (job: DeliveryJob, error: unknown, what: string) => Promise<void>,
) {
  const { slots, noteDue } = context
  const record = recordStep(deps, context, failJob)
  return async (job: DeliveryJob, claim: Claimed, hold: Hold) => {
    try {
      if (claim.kind === 'failed') return await failJob(job, claim.error, 'claimed')
      if (claim.kind === 'settled') {
        logSettled(deps, claimRequestOf(job), claim)
        if (claim.nextAttemptAt) noteDue(claim.nextAttemptAt)
        return
      }
      await slots.acquire()
      let entry: PendingRecord
      try {
        entry = await sendOrDefer(deps, context, job, claim, hold)
      } finally {
        slots.release()
      }
      await record(job, entry)
    } catch (error) {
      deps.logger.error('delivery step failed unexpectedly', { messageId: job.data.messageId, ...describeError(error) })
    } finally {
      slots.settled()
    }
  }
}

/** The outcome recorded, and what the record says acted on; the job failed back if it cannot be. */
function recordStep(
  deps: DeliveryDeps,
  { recorder, local, noteDue }: StepContext,
  failJob: (job: DeliveryJob, error: unknown, what: string) => Promise<void>,
) {
  return async (job: DeliveryJob, entry: PendingRecord) => {
    const throttled = local.throttledBy(entry)
    let result: Recorded
    try {
      result = await recorder.add(entry)
    } catch (error) {
      if (throttled) local.unthrottle(throttled)
      return await failJob(job, error, 'recorded')
    }
    local.learn(throttled, result)
    reportRecorded(deps, entry, result)
    if (result.kind === 'retry_scheduled' || result.kind === 'deferred') noteDue(result.nextAttemptAt)
    // Nothing was recorded for this attempt: if it is still ours (the message went final under
    // us, e.g. superseded), settle the job; if the attempt lapsed this touches nothing.
    if (result.kind === 'lease_lost')
      await deps.boss.complete(QUEUES.delivery, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
  }
}
