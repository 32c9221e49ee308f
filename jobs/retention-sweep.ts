import type { Knex } from 'knex'
import type { Logger } from '../src/logging/logger.ts'
import type { WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import {
  deleteFinishedBefore,
  deleteRateLimitHitsBefore,
  deleteStaleChannelRegistrations,
  sweepIdentity,
  sweepInvitations,
  sweepPlatform,
} from '../src/outbox/maintenance-sql.ts'
import { deleteEventsBefore } from '../src/platform/webhook-deliveries-sql.ts'
import { runTick } from './tick.ts'

export const SWEEP_BATCH_SIZE = 1_000
const DAY_MS = 24 * 3600 * 1000
// Rate-limit windows are an hour at most; a day of hits is plenty for anyone looking.
const RATE_LIMIT_HIT_RETENTION_MS = DAY_MS
// Sessions, elevations, challenges and abandoned sign-ups are kept this long after they end.
export const IDENTITY_RETENTION_DAYS = 30
// Invitations are kept this long after they were accepted, revoked or expired (once no message refers to them).
export const INVITATION_RETENTION_DAYS = 90
// A worker's channel registration is kept a week after its last heartbeat (unless it is part of the current set: docs/delivery.md "Channels").
export const CHANNEL_REGISTRATION_RETENTION_DAYS = 7
// Events (and, by cascade, their webhook deliveries) unless RETENTION_EVENTS_DAYS says otherwise.
const DEFAULT_EVENT_RETENTION_DAYS = 30

export type SweepDeps = {
  db: Knex
  clock: () => Date
  logger: Logger
  publishedDays: number
  deadLetteredDays: number
  /** Days audit records are kept (RETENTION_AUDIT_DAYS). */
  auditDays: number
  /** Days an event and its webhook deliveries are kept (RETENTION_EVENTS_DAYS; default 30). */
  eventDays?: number
  batchSize?: number
  metrics?: WorkerMetrics
}

async function inBatches(
  deleteBatch: (limit: number) => Promise<number>,
  batchSize: number,
): Promise<{ deleted: number; batches: number }> {
  let deleted = 0
  let batches = 0
  for (;;) {
    const count = await deleteBatch(batchSize)
    if (count > 0) batches += 1
    deleted += count
    if (count < batchSize) return { deleted, batches }
  }
}

/**
 * One retention pass (docs/architecture.md §5): published messages older than `publishedDays` and dead-lettered ones
 * older than `deadLetteredDays` go with their attempts and dead letters, in bounded batches (each
 * its own short statement) so no lock is held for long. Open messages are never touched here.
 * Then the identity rows that ended more than 30 days ago: sessions, elevations, challenges no
 * message refers to, and sign-ups never confirmed; invitations 90 days after they ended. Worker
 * channel registrations not seen for 7 days, except those that make up the available channels.
 * Events older than `eventDays`, their webhook deliveries with them.
 */
export async function runRetentionSweep(deps: SweepDeps) {
  const now = deps.clock().getTime()
  const batchSize = deps.batchSize ?? SWEEP_BATCH_SIZE
  const published = await inBatches(
    (limit) => deleteFinishedBefore(deps.db, 'published', new Date(now - deps.publishedDays * DAY_MS), limit),
    batchSize,
  )
  const deadLettered = await inBatches(
    (limit) => deleteFinishedBefore(deps.db, 'dead_lettered', new Date(now - deps.deadLetteredDays * DAY_MS), limit),
    batchSize,
  )
  const rateLimitHits = await inBatches(
    (limit) => deleteRateLimitHitsBefore(deps.db, new Date(now - RATE_LIMIT_HIT_RETENTION_MS), limit),
    batchSize,
  )
  // Identity rows after the outbox rows that refer to them, so a challenge can go once its messages have.
  const identity = { sessions: 0, elevations: 0, challenges: 0, abandonedSignUps: 0, batches: 0 }
  for (;;) {
    const swept = await sweepIdentity(deps.db, new Date(now), IDENTITY_RETENTION_DAYS, batchSize)
    const total = swept.sessions + swept.elevations + swept.challenges + swept.abandonedSignUps
    if (total > 0) identity.batches += 1
    identity.sessions += swept.sessions
    identity.elevations += swept.elevations
    identity.challenges += swept.challenges
    identity.abandonedSignUps += swept.abandonedSignUps
    if (Math.max(swept.sessions, swept.elevations, swept.challenges, swept.abandonedSignUps) < batchSize) break
  }
  const invitations = await inBatches((limit) => sweepInvitations(deps.db, new Date(now), INVITATION_RETENTION_DAYS, limit), batchSize)
  // Audit records are kept RETENTION_AUDIT_DAYS, idempotency keys one day (platform.sweep).
  const platform = await inBatches((limit) => sweepPlatform(deps.db, new Date(now), deps.auditDays, limit), batchSize)
  const events = await inBatches(
    (limit) => deleteEventsBefore(deps.db, new Date(now - (deps.eventDays ?? DEFAULT_EVENT_RETENTION_DAYS) * DAY_MS), limit),
    batchSize,
  )
  // One row per worker that ever started: one statement, no batches.
  const channelRegistrations = await deleteStaleChannelRegistrations(deps.db, new Date(now - CHANNEL_REGISTRATION_RETENTION_DAYS * DAY_MS))
  return {
    publishedDeleted: published.deleted,
    deadLetteredDeleted: deadLettered.deleted,
    rateLimitHitsDeleted: rateLimitHits.deleted,
    sessionsDeleted: identity.sessions,
    elevationsDeleted: identity.elevations,
    challengesDeleted: identity.challenges,
    abandonedSignUpsDeleted: identity.abandonedSignUps,
    invitationsDeleted: invitations.deleted,
    platformRowsDeleted: platform.deleted,
    channelRegistrationsDeleted: channelRegistrations,
    eventsDeleted: events.deleted,
    batches:
      published.batches +
      deadLettered.batches +
      rateLimitHits.batches +
      identity.batches +
      invitations.batches +
      platform.batches +
      events.batches,
  }
}

export function createRetentionSweepHandler(deps: SweepDeps) {
  return () =>
    runTick(
      'retention sweep',
      deps.logger,
      () => runRetentionSweep(deps),
      (counts) => deps.metrics?.maintenanceDone('retention_sweep', counts),
    )
}
