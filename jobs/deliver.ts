import type { Knex } from 'knex'
import type { Job, PgBoss } from 'pg-boss'
import { envelopeContext, open } from '../src/crypto/envelope.ts'
import { DeliveryFailure, type Provider } from '../src/delivery/provider.ts'
import { renderCodeMessage } from '../src/delivery/templates.ts'
import { describeError, type Logger } from '../src/logging/logger.ts'
import { claimMessage } from '../src/outbox/claim.ts'
import type { Channel, DeliveryJobData } from '../src/outbox/constants.ts'
import type { Lease } from '../src/outbox/messages-sql.ts'
import { recordOutcome, type Outcome, type RetrySettings } from '../src/outbox/record.ts'

/** Everything a delivery needs, injected so tests drive the clock and the providers. */
export type DeliveryDeps = {
  db: Knex
  boss: PgBoss
  outboxKey: Buffer
  providers: Partial<Record<Channel, Provider>>
  clock: () => Date
  logger: Logger
  settings: RetrySettings & { sendTimeoutMs: number }
}

/**
 * One job, one message: claim (short transaction) → open → send (no transaction open) → record
 * (short transaction). Returns normally whenever the outcome is recorded; throws only when
 * recording itself failed, so pg-boss fails the job and retries it (the next holder takes the
 * lease over); a worker that dies instead leaves the job to expire after its lease.
 */
export async function deliverOne(deps: DeliveryDeps, job: Pick<Job<DeliveryJobData>, 'id' | 'retryCount' | 'data'>): Promise<void> {
  const { messageId } = job.data
  const lease: Lease = { jobId: job.id, retryCount: job.retryCount }
  const claim = await claimMessage(deps.db, deps.boss, messageId, lease, deps.clock())
  if (claim.kind === 'settled') {
    deps.logger.info('delivery settled without sending', { messageId, why: claim.why })
    return
  }
  const { message } = claim
  const context = { messageId, purpose: message.purpose, channel: message.channel, attempt: message.attempt_count + 1 }
  const record = async (outcome: Outcome) => {
    const recorded = await recordOutcome(deps.db, deps.boss, deps.settings, messageId, lease, outcome, deps.clock())
    if (recorded.kind === 'lease_lost') deps.logger.warn('lease lost: result not recorded', context)
    else deps.logger.info('delivery recorded', { ...context, ...recorded })
  }

  let secret: Buffer
  try {
    secret = open(deps.outboxKey, claim.envelope, envelopeContext(messageId, message.purpose))
  } catch (error) {
    // A human must look: tampering, a wrong key or a botched deploy, never a flaky network.
    deps.logger.error('SECURITY: security outbox envelope failed to open', { ...context, ...describeError(error), security: true })
    await record({ kind: 'dead_letter', reason: 'decryption_failed' })
    return
  }

  const provider = deps.providers[message.channel]
  const started = performance.now()
  let outcome: Outcome
  try {
    if (!provider) throw new DeliveryFailure('UNAVAILABLE', 'ChannelNotConfigured')
    if (message.purpose === 'invitation') throw new DeliveryFailure('unexpected_worker_error', 'InvitationNotSupported')
    const content = renderCodeMessage(message.purpose, secret.toString('utf8'), message.expires_at, deps.clock())
    const { providerMessageId } = await provider.dispatch(
      { messageId, destination: message.destination, ...content },
      AbortSignal.timeout(deps.settings.sendTimeoutMs),
    )
    outcome = { kind: 'published', providerMessageId, durationMs: performance.now() - started }
  } catch (error) {
    const failure = error instanceof DeliveryFailure ? error : undefined
    outcome = {
      kind: 'failed',
      failureClass: failure?.failureClass ?? 'unexpected_worker_error',
      retryAfterAt: failure?.retryAfterAt ?? null,
      durationMs: performance.now() - started,
    }
    deps.logger.warn('delivery attempt failed', { ...context, failureClass: outcome.failureClass, providerCode: failure?.providerCode, ...describeError(error) })
  } finally {
    secret.fill(0)
  }
  await record(outcome)
}

/**
 * The pg-boss handler for a batch. Each job is delivered independently; if any could not be
 * recorded the batch throws, and pg-boss retries only the jobs not already settled.
 */
export function createDeliveryHandler(deps: DeliveryDeps) {
  return async (jobs: Job<DeliveryJobData>[]): Promise<void> => {
    const results = await Promise.allSettled(jobs.map((job) => deliverOne(deps, job)))
    const failures = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected')
    for (const failure of failures) deps.logger.error('delivery could not be recorded; pg-boss retries the job', describeError(failure.reason))
    if (failures.length > 0) throw new Error(`${failures.length} of ${jobs.length} deliveries could not be recorded`)
  }
}
