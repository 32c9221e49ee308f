import type { Knex } from 'knex'
import { generateCode, hashCode } from '../crypto/codes.ts'
import { requireElevationTx } from '../identity/elevation.ts'
import { ConflictError, ForbiddenError, NotFoundError, type DomainError } from '../identity/errors.ts'
import type { SessionContext } from '../identity/sessions.ts'
import { DEAD_LETTER_REASONS, DELIVERY_EVENTS } from '../outbox/constants.ts'
import { deliveryEventsSince } from '../outbox/delivery-events-sql.ts'
import { viewOf, type ProviderHealth } from '../outbox/provider-health.ts'
import { providerStates } from '../outbox/provider-states-sql.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import { backlogSummary, deadLetterPageRows, gaugeSummary, reissueCandidateTx, type CountsRow } from '../outbox/staff-functions-sql.ts'
import { encodePageCursor, type PageCursor } from './page-cursor.ts'
import { replaceChallengeCodeTx } from '../identity/challenges-sql.ts'
import { insertAuditRecordTx } from './staff-sql.ts'
import { requestDigest, useIdempotencyKeyTx } from './idempotency.ts'

/** A signed-in staff caller: the session's ids and the SHA-256 of its bearer token. */
export type StaffSession = SessionContext & { tokenHash: Buffer }

/**
 * The staff functions refuse (42501) a token hash that names no live staff session; the route
 * answers that like any other non-staff caller.
 */
export async function asStaff<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if ((error as { code?: unknown }).code === '42501') throw new ForbiddenError('not_staff', 'Only staff may do this.')
    throw error
  }
}

function summaryOf(
  row: CountsRow,
  events: Awaited<ReturnType<typeof deliveryEventsSince>>,
  providers: ReadonlyMap<string, ProviderHealth>,
  now: Date,
) {
  const deadLettersLast24h = Object.fromEntries(DEAD_LETTER_REASONS.map((reason) => [reason, 0])) as Record<string, number>
  for (const [reason, count] of Object.entries(row.dead_letters_last_24h ?? {})) deadLettersLast24h[reason] = Number(count)
  // Per purpose: what the providers reported after "published".
  const deliveryEventsLast24h: Record<string, Record<string, number>> = {}
  for (const entry of events) {
    deliveryEventsLast24h[entry.purpose] ??= Object.fromEntries(DELIVERY_EVENTS.map((event) => [event, 0]))
    deliveryEventsLast24h[entry.purpose]![entry.event] = entry.count
  }
  const age = row.oldest_due_pending_age_seconds
  return {
    states: {
      pending: Number(row.pending),
      leased: Number(row.leased),
      published: Number(row.published),
      dead_lettered: Number(row.dead_lettered),
    },
    oldestDuePendingAgeSeconds: age === null ? null : Math.max(0, Math.floor(Number(age))),
    deadLettersLast24h,
    deliveryEventsLast24h,
    queue: { queued: Number(row.queued), deferred: Number(row.deferred), active: Number(row.active), failed: Number(row.failed) },
    providers: [...providers.values()].map((health) => ({
      provider: health.provider,
      channel: health.channel,
      state: viewOf(health, now),
      failureStreak: health.failureStreak,
      downSince: health.downSince?.toISOString() ?? null,
      nextProbeAt: health.nextProbeAt?.toISOString() ?? null,
      pausedUntil: health.pausedUntil?.toISOString() ?? null,
    })),
  }
}

export type BacklogSummary = ReturnType<typeof summaryOf>

/** `GET /platform-admin/security-outbox/backlog`: one request answers "is delivery healthy?". */
export async function backlog(db: Knex, staff: Pick<StaffSession, 'tokenHash'>, now: Date): Promise<BacklogSummary> {
  const counts = await asStaff(() => backlogSummary(db, staff.tokenHash, now))
  return summaryOf(counts, await deliveryEventsSince(db, new Date(now.getTime() - 24 * 3_600_000)), await providerStates(db, now), now)
}

/** The same counts for the web's /metrics gauges, which no staff session scrapes: counts only, never a row. */
export async function gauges(db: Knex, now: Date): Promise<BacklogSummary> {
  return summaryOf(
    await gaugeSummary(db, now),
    await deliveryEventsSince(db, new Date(now.getTime() - 24 * 3_600_000)),
    await providerStates(db, now),
    now,
  )
}

/** `GET …/dead-letters`: a keyset page, newest first; `after` goes to older entries, `before` to newer. */
export async function deadLetterPage(
  db: Knex,
  staff: Pick<StaffSession, 'tokenHash'>,
  input: { limit: number; after?: PageCursor; before?: PageCursor },
  now: Date,
) {
  const rows = await asStaff(() =>
    deadLetterPageRows(db, staff.tokenHash, now, {
      limit: input.limit + 1,
      ...(input.after ? { after: input.after } : {}),
      ...(input.before ? { before: input.before } : {}),
    }),
  )
  // One row more than asked tells whether the direction of travel goes on; it is dropped at that end.
  const more = rows.length > input.limit
  const page = input.before ? rows.slice(rows.length - Math.min(rows.length, input.limit)) : rows.slice(0, input.limit)
  const items = page.map((row) => ({
    messageId: row.message_id,
    purpose: row.purpose,
    channel: row.channel,
    maskedDestination: row.masked_destination,
    attemptCount: row.attempt_count,
    reason: row.reason,
    lastFailureClass: row.last_failure_class,
    deadLetteredAt: row.dead_lettered_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  }))
  const first = page[0]
  const last = page.at(-1)
  return {
    items,
    pageInfo: {
      hasNextPage: input.before ? true : more,
      hasPreviousPage: input.before ? more : input.after !== undefined,
      startCursor: first ? encodePageCursor(first.dead_lettered_at, first.message_id) : null,
      endCursor: last ? encodePageCursor(last.dead_lettered_at, last.message_id) : null,
    },
  }
}

export type ReissueDeps = Pick<EnqueueDeps, 'boss' | 'outboxKey' | 'codeHashKey' | 'logger' | 'envelopeVersion'> & { clock: () => Date }

/** A reissue's refusal as its Idempotency-Key remembers it (`response = {refused}`), to be answered again on a repeat. */
export type StoredRefusal = { kind: 'not_found' | 'conflict'; code: string; message: string }
type Reissued = { messageId: string; challengeExpiresAt: string }
/** What a reissue came to; `replayed` when it is the first answer of an earlier request with the same key. */
export type ReissueOutcome = ({ reissued: Reissued } | { refused: DomainError }) & { replayed: boolean }

const refusalOf = (stored: StoredRefusal): DomainError =>
  stored.kind === 'not_found' ? new NotFoundError(stored.code, stored.message) : new ConflictError(stored.code, stored.message)

/** What one reissue came to in its transaction: the new message, or the refusal as a key remembers it. */
export type OneReissue = { reissued: Reissued } | { refused: StoredRefusal }

/**
 * Reissues one dead letter in the caller's transaction: check and lock the dead letter and its
 * challenge (`outbox.reissue_candidate`), mint a new code, replace the challenge's code hash, seal
 * and enqueue a fresh message, and write one audit record; or say why not. The single reissue and
 * the redrive of many both come here.
 */
export async function reissueOneTx(
  trx: Knex.Transaction,
  deps: ReissueDeps,
  staff: StaffSession,
  messageId: string,
  now: Date,
): Promise<OneReissue> {
  const refuse = (refusal: StoredRefusal): OneReissue => ({ refused: refusal })
  const candidate = await asStaff(() => reissueCandidateTx(trx, staff.tokenHash, messageId, now))
  // Reissue refusals (the rules of `outbox.reissue_candidate`), each its own stable problem code.
  if (candidate.refusal === 'dead_letter_not_found')
    return refuse({ kind: 'not_found', code: candidate.refusal, message: 'There is no such dead letter.' })
  if (candidate.refusal === 'reissue_destination_mismatch') {
    // The row names another address than its challenge: tampering, or a row from elsewhere. Never the destination itself here.
    deps.logger?.error("SECURITY: reissue refused: the dead letter is not addressed to its challenge's identifier", {
      messageId,
      staffIdentityId: staff.identityId,
      errorCode: candidate.refusal,
      security: true,
    })
    return refuse({
      kind: 'conflict',
      code: candidate.refusal,
      message: "This dead letter is not addressed to its challenge's own identifier; nothing was sent.",
    })
  }
  if (candidate.refusal === 'destination_suppressed')
    return refuse({
      kind: 'conflict',
      code: candidate.refusal,
      message:
        'The destination is suppressed (a bounce or complaint): a new code would die unsent. Lift the suppression first, if the address works again.',
    })
  if (candidate.refusal)
    return refuse({ kind: 'conflict', code: candidate.refusal, message: `This dead letter cannot be reissued (${candidate.refusal}).` })
  // The candidate's destination is the challenge's login identifier, never the dead letter's row.
  const code = generateCode()
  await replaceChallengeCodeTx(trx, candidate.challenge_id, hashCode(deps.codeHashKey, candidate.challenge_id, code), now)
  const enqueued = await enqueueSecurityMessageTx(
    trx,
    {
      boss: deps.boss,
      outboxKey: deps.outboxKey,
      codeHashKey: deps.codeHashKey,
      logger: deps.logger,
      envelopeVersion: deps.envelopeVersion,
    },
    {
      purpose: candidate.purpose,
      challengeId: candidate.challenge_id,
      channel: candidate.channel,
      destination: candidate.destination,
      locale: candidate.locale,
      expiresAt: candidate.expires_at,
      // The dead letter's code again: it counts for whoever asked for that one.
      askedLike: messageId,
    },
    code,
  )
  await insertAuditRecordTx(
    trx,
    {
      actor: staff.identityId,
      action: 'security_outbox.dead_letter_reissued',
      subject: messageId,
      details: { newMessageId: enqueued.messageId },
    },
    now,
  )
  return { reissued: { messageId: enqueued.messageId, challengeExpiresAt: candidate.expires_at.toISOString() } }
}

/**
 * The audited staff reissue of a dead letter, one transaction: the elevation is checked, the
 * idempotency key claimed, and the dead letter reissued (`reissueOneTx`). The key remembers the
 * first answer, a reissue or a refusal of the dead letter (404, 409), and a repeat answers it
 * again without doing any work; a concurrent second reissue waits for the first and is refused
 * (`newer_message_exists`).
 */
export async function reissueDeadLetter(
  db: Knex,
  deps: ReissueDeps,
  input: { staff: StaffSession; elevationToken: string | undefined; idempotencyKey: string; messageId: string },
): Promise<ReissueOutcome> {
  const now = deps.clock()
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const { claim, remember } = await useIdempotencyKeyTx<Reissued | { refused: StoredRefusal }>(
      trx,
      { identityId: input.staff.identityId, scope: 'reissue', key: input.idempotencyKey },
      requestDigest(`reissue:${input.messageId}`),
      now,
    )
    if (!claim.claimed) {
      if ('refused' in claim.response) return { refused: refusalOf(claim.response.refused), replayed: true }
      return { reissued: claim.response, replayed: true }
    }
    const one = await reissueOneTx(trx, deps, input.staff, input.messageId, now)
    // A refusal commits the key with it: the repeat answers the same refusal, even once it no longer holds.
    await remember('refused' in one ? { refused: one.refused } : one.reissued)
    return 'refused' in one ? { refused: refusalOf(one.refused), replayed: false } : { reissued: one.reissued, replayed: false }
  })
}
