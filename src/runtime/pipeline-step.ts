import {
  claimRequestOf,
  logSettled,
  reportRecorded,
  routeClaims,
  sendClaimed,
  suppressedClaims,
  type DeliveryDeps,
  type DeliveryJob,
  type PendingRecord,
} from '../../jobs/deliver.ts'
import { heldBySendCaps } from '../../jobs/deliver-caps.ts'
import { deferClaimed, routedChannel } from '../../jobs/deliver-holds.ts'
import { describeError } from '../logging/logger.ts'
import { inSpan } from '../logging/trace-context.ts'
import { claimMessages } from '../outbox/claim.ts'
import { QUEUES } from '../outbox/constants.ts'
import type { Route } from '../outbox/provider-health.ts'
import type { Recorded } from '../outbox/record.ts'
import type { LocalView, pipelineRecorder } from './pipeline-record.ts'
import type { Slots } from './pipeline-slots.ts'

type Claimed = Awaited<ReturnType<typeof claimMessages>>[number]

/** What one batch's step shares with the rest of the pipeline. */
export type StepContext = {
  slots: Slots
  recorder: ReturnType<typeof pipelineRecorder>
  local: LocalView
  /** A deferred job this worker knows of falls due at this time. */
  noteDue: (at: Date) => void
}

/**
 * The step every fetched batch takes: one claim statement (then suppression, routing and send
 * caps for the whole batch), and each message on its own from there — a send slot, the send
 * (`sendClaimed`: open, render, send, classify), the group-commit record. A job whose claim or
 * record fails even alone is failed back to pg-boss (its retry takes the lease over); `failedBack`
 * names them.
 */
export function deliveryStep(deps: DeliveryDeps, context: StepContext) {
  const { logger, boss } = deps
  const { slots, recorder, local, noteDue } = context
  const queue = QUEUES.delivery
  const failedBack = new Set<DeliveryJob>()

  const failJob = async (job: DeliveryJob, error: unknown, what: string) => {
    failedBack.add(job)
    logger.error(`delivery could not be ${what}; pg-boss retries the job`, { messageId: job.data.messageId, ...describeError(error) })
    // Best effort: if this fails too (the database is away), the job's lease expires into a retry.
    await boss.fail(queue, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
  }

  /** The claimed message sent, or deferred without an attempt (capped, held, paused here). */
  const sendOrDefer = async (job: DeliveryJob, claim: Extract<Claimed, { kind: 'claimed' }>, hold: Hold): Promise<PendingRecord> => {
    const request = claimRequestOf(job)
    if (hold.capped) return deferClaimed(request, claim, hold.capped)
    if (hold.route?.kind === 'held') return deferClaimed(request, claim, hold.route.until, hold.route.providers)
    // A phone message routed to SMS is held back by the sms channel's pause, not WhatsApp's.
    const channel = routedChannel(deps, claim.message.channel, hold.route) ?? claim.message.channel
    if (local.holdsBack(channel, hold.route) && !hold.suppressed) return deferClaimed(request, claim)
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

  /** The outcome recorded, and what the record says acted on; the job failed back if it cannot be. */
  const record = async (job: DeliveryJob, claim: Extract<Claimed, { kind: 'claimed' }>, entry: PendingRecord, hold: Hold) => {
    const channel = routedChannel(deps, claim.message.channel, hold.route) ?? claim.message.channel
    const throttled = local.throttledBy(channel, entry)
    let result: Recorded
    try {
      result = await recorder.add(entry)
    } catch (error) {
      if (throttled) local.unthrottle(channel)
      return await failJob(job, error, 'recorded')
    }
    local.learn(channel, throttled, result)
    reportRecorded(deps, entry, result)
    if (result.kind === 'retry_scheduled' || result.kind === 'deferred') noteDue(result.nextAttemptAt)
    // Nothing was recorded for this attempt: if it is still ours (the message went final under
    // us, e.g. superseded), settle the job; if the attempt lapsed this touches nothing.
    if (result.kind === 'lease_lost') await boss.complete(queue, { id: job.id, retryCount: job.retryCount }).catch(() => undefined)
  }

  /** One job from claim to settlement; its hold is released at the end whatever happened. */
  const settleOne = async (job: DeliveryJob, claim: Claimed, hold: Hold) => {
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
        entry = await sendOrDefer(job, claim, hold)
      } finally {
        slots.release()
      }
      await record(job, claim, entry, hold)
    } catch (error) {
      logger.error('delivery step failed unexpectedly', { messageId: job.data.messageId, ...describeError(error) })
    } finally {
      slots.settled()
    }
  }

  /** The batch's claim, then, before any send, what holds each message back. */
  const claimBatch = async (jobs: DeliveryJob[]) => {
    const started = performance.now()
    try {
      const claims = await claimMessages(deps.db, boss, jobs.map(claimRequestOf), deps.clock())
      // Before any send: destinations on the suppression list are dead-lettered, never sent to.
      const suppressed = await suppressedClaims(deps, claims)
      // Then each message's provider: failover, the phone fallback and the outage hold (one read of the providers' states).
      const routes = await routeClaims(deps, claims, (id) => suppressed.has(id), local.downAre)
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

  return {
    failedBack,
    /** Claims the batch and settles each of its jobs; resolves once every one is settled. */
    async claimAndSend(jobs: DeliveryJob[]) {
      const { claims, suppressed, capped, routes } = await claimBatch(jobs)
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

/** What the batch's checks decided for one claimed message. */
type Hold = { suppressed: boolean; capped?: Date; route?: Route }
