import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import { envelopeContext, open } from '../src/crypto/envelope.ts'
import { DeliveryFailure, type Provider } from '../src/delivery/provider.ts'
import { composeMessage, defaultTemplates, UnreadableBodyError } from '../src/delivery/compose.ts'
import type { Templates } from '../src/delivery/templates.ts'
import { suppressedAmong } from '../src/outbox/delivery-events-sql.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import { claimMessages, type Claim } from '../src/outbox/claim.ts'
import type { WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import type { Channel, DeliveryJobData } from '../src/outbox/constants.ts'
import { recordOutcomes, type Outcome, type RecordRequest, type RetrySettings } from '../src/outbox/record.ts'

/** Everything a delivery needs, injected so tests drive the clock and the providers. */
export type DeliveryDeps = {
  db: Knex
  boss: PgBoss
  outboxKey: Buffer
  providers: Partial<Record<Channel, Provider>>
  clock: () => Date
  logger: Logger
  settings: RetrySettings & { sendTimeoutMs: number }
  /** `<base>/join#token=…`; undefined when unconfigured in staging/production (invitations then wait). */
  invitationLinkBaseUrl?: string
  metrics?: WorkerMetrics
  /** The message templates with this deployment's branding (default: PRODUCT_NAME Sealpost, en). */
  templates?: Templates
}

type DeliveryJob = Pick<Job<DeliveryJobData>, 'id' | 'retryCount' | 'data'>

/** A single job: the batch path with a batch of one (tests drive it as a runOnce). */
export async function deliverOne(deps: DeliveryDeps, job: DeliveryJob): Promise<void> {
  await deliverBatch(deps, [job])
}

/**
 * A batch of jobs, one message each: claim (one short transaction for the batch) → open and send
 * each message (no transaction open) → record (one short transaction for the batch). Returns
 * normally whenever every outcome is recorded; throws only when recording itself failed, so
 * pg-boss fails the jobs still active and retries them (the next holder takes the lease over); a
 * worker that dies instead leaves its jobs to expire after their lease.
 */
export async function deliverBatch(deps: DeliveryDeps, jobs: readonly DeliveryJob[]): Promise<void> {
  const requests = jobs.map((job) => ({ messageId: job.data.messageId, lease: { jobId: job.id, retryCount: job.retryCount } }))
  const claims = await claimMessages(deps.db, deps.boss, requests, deps.clock())
  const toRecord: (RecordRequest & { context: Record<string, unknown> })[] = []
  const unclaimed: unknown[] = []
  const suppressed = await suppressedClaims(deps, claims)
  await Promise.all(claims.map(async (claim, index) => {
    const { messageId, lease } = requests[index]!
    if (claim.kind === 'failed') {
      unclaimed.push(claim.error)
      return
    }
    if (claim.kind === 'settled') {
      deps.logger.info('delivery settled without sending', { messageId, why: claim.why })
      return
    }
    const { message } = claim
    const context = { messageId, purpose: message.purpose, channel: message.channel, attempt: message.attempt_count + 1 }
    // A suppressed destination (a permanent bounce or a complaint) is never sent to again.
    const outcome: Outcome = suppressed.has(messageId) ? { kind: 'dead_letter', reason: 'destination_suppressed' } : await attempt(deps, claim, context)
    toRecord.push({ messageId, lease, outcome, context })
  }))
  const recorded = await recordOutcomes(deps.db, deps.boss, deps.settings, toRecord, deps.clock())
  recorded.forEach((result, index) => {
    const { context } = toRecord[index]!
    if (result.kind === 'lease_lost') deps.logger.warn('lease lost: result not recorded', context)
    else deps.logger.info('delivery recorded', { ...context, ...result })
    const { outcome } = toRecord[index]!
    if (result.kind !== 'lease_lost' && outcome.kind !== 'dead_letter') {
      deps.metrics?.attempt(result.kind === 'published' ? 'published' : result.kind === 'retry_scheduled' ? 'retryable_error' : 'failed', outcome.kind === 'failed' ? outcome.failureClass : null)
    }
    if (result.kind === 'dead_lettered') deps.metrics?.deadLettered(result.reason)
  })
  // The others are recorded; now let pg-boss retry the jobs that could not even be claimed.
  if (unclaimed.length > 0) throw unclaimed[0]
}

/** The claimed messages whose destination is on the suppression list (DESIGN §12), checked before any send. */
async function suppressedClaims(deps: DeliveryDeps, claims: readonly (Claim | { kind: 'failed' })[]): Promise<Set<string>> {
  return await suppressedAmong(deps.db, claims.flatMap((claim) => (claim.kind === 'claimed' ? [claim.message.id] : [])))
}

/** Opens the envelope and sends; every failure becomes an outcome, nothing throws. */
async function attempt(deps: DeliveryDeps, claim: Extract<Claim, { kind: 'claimed' }>, context: Record<string, unknown>): Promise<Outcome> {
  const { message } = claim
  if (message.purpose === 'invitation' && !deps.invitationLinkBaseUrl) {
    // Retryable, and the token stays sealed: one-time codes never wait on this setting.
    return { kind: 'failed', failureClass: 'invitation_link_unconfigured', retryAfterAt: null, durationMs: 0 }
  }
  let secret: Buffer
  try {
    secret = open(deps.outboxKey, claim.envelope, envelopeContext(message.id, message.purpose))
  } catch (error) {
    // A human must look: tampering, a wrong key or a botched deploy, never a flaky network.
    deps.logger.error('SECURITY: security outbox envelope failed to open', { ...context, ...describeError(error), security: true })
    return { kind: 'dead_letter', reason: 'decryption_failed' }
  }

  const provider = deps.providers[message.channel]
  if (message.attempt_count === 0) deps.metrics?.firstSendStarted(message.channel, (deps.clock().getTime() - message.created_at.getTime()) / 1000)
  const started = performance.now()
  try {
    if (!provider) throw new DeliveryFailure('UNAVAILABLE', 'ChannelNotConfigured')
    let content: ReturnType<typeof composeMessage>
    try {
      content = composeMessage(deps.templates ?? defaultTemplates(), message, secret, { organizationName: claim.organizationName, invitationLinkBaseUrl: deps.invitationLinkBaseUrl, now: deps.clock() })
    } catch (error) {
      if (!(error instanceof UnreadableBodyError)) throw error
      deps.logger.error('SECURITY: a sealed message body is unreadable', { ...context, ...describeError(error), security: true })
      return { kind: 'dead_letter', reason: 'decryption_failed' }
    }
    const { providerMessageId } = await provider.dispatch(
      { messageId: message.id, destination: message.destination, purpose: message.purpose, ...content },
      AbortSignal.timeout(deps.settings.sendTimeoutMs),
    )
    deps.metrics?.sent(message.channel, (performance.now() - started) / 1000)
    return { kind: 'published', providerMessageId, durationMs: performance.now() - started }
  } catch (error) {
    const failure = error instanceof DeliveryFailure ? error : undefined
    const outcome: Outcome = {
      kind: 'failed',
      failureClass: failure?.failureClass ?? 'unexpected_worker_error',
      retryAfterAt: failure?.retryAfterAt ?? null,
      durationMs: performance.now() - started,
    }
    deps.logger.warn('delivery attempt failed', { ...context, failureClass: outcome.failureClass, providerCode: failure?.providerCode, ...describeError(error) })
    return outcome
  } finally {
    secret.fill(0)
  }
}

/**
 * The pg-boss handler for a batch. If the batch could not be recorded it throws, and pg-boss
 * retries only the jobs not already settled.
 */
export function createDeliveryHandler(deps: DeliveryDeps) {
  return async (jobs: Job<DeliveryJobData>[]): Promise<void> => {
    try {
      await deliverBatch(deps, jobs)
    } catch (error) {
      deps.logger.error('delivery could not be recorded; pg-boss retries the jobs', { jobs: jobs.length, ...describeError(error) })
      throw error
    }
  }
}
