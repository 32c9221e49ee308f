import type { Knex } from 'knex'
import { requireElevationTx } from '../identity/elevation.ts'
import { redriveCandidatesTx } from '../outbox/console-functions-sql.ts'
import { requestDigest, useIdempotencyKeyTx } from './idempotency.ts'
import { asStaff, reissueOneTx, type ReissueDeps, type StaffSession } from './outbox-admin.ts'
import { insertAuditRecordTx } from './staff-sql.ts'

/** The most dead letters one redrive reissues: one transaction holds their locks, and one click must not flood a provider. */
export const REDRIVE_MAX = 50

/** What a redrive did: how many it looked at and reissued, each refusal counted by its code, where the next call goes on. */
export type Redriven = {
  reason: string
  considered: number
  reissued: number
  skipped: Record<string, number>
  endCursor: string | null
  hasMore: boolean
}

/**
 * `POST …/dead-letters/redrives` (staff with a fresh step-up, an Idempotency-Key): reissues up to
 * `limit` dead letters of one reason, oldest first after `after`, in one transaction, each through
 * the single reissue's own step (`reissueOneTx`: the same checks, refusals and audit record), so a
 * dead letter that cannot be reissued (a suppressed destination, an expired or used challenge, a
 * newer code already sent, an invitation…) is skipped and counted by its refusal code. One more
 * audit record names the redrive and its counts. The key remembers the answer: a repeat does nothing.
 * The answer's `endCursor` is the `after` of the next call, so skipped dead letters are not met again.
 */
export async function redriveDeadLetters(
  db: Knex,
  deps: ReissueDeps,
  input: {
    staff: StaffSession
    elevationToken: string | undefined
    idempotencyKey: string
    reason: string
    limit: number
    after?: string
  },
): Promise<{ redriven: Redriven; replayed: boolean }> {
  const now = deps.clock()
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, now)
    const { claim, remember } = await useIdempotencyKeyTx<Redriven>(
      trx,
      { identityId: input.staff.identityId, scope: 'redrive', key: input.idempotencyKey },
      requestDigest(`redrive:${input.reason}:${input.limit}:${input.after ?? ''}`),
      now,
    )
    if (!claim.claimed) return { redriven: claim.response, replayed: true }
    const ids = await asStaff(() =>
      redriveCandidatesTx(trx, input.staff.tokenHash, now, {
        reason: input.reason,
        limit: input.limit + 1,
        ...(input.after ? { afterId: input.after } : {}),
      }),
    )
    const batch = ids.slice(0, input.limit)
    const redriven: Redriven = {
      reason: input.reason,
      considered: batch.length,
      reissued: 0,
      skipped: {},
      endCursor: batch.at(-1) ?? input.after ?? null,
      hasMore: ids.length > input.limit,
    }
    for (const messageId of batch) {
      const one = await reissueOneTx(trx, deps, input.staff, messageId, now)
      if ('reissued' in one) redriven.reissued += 1
      else redriven.skipped[one.refused.code] = (redriven.skipped[one.refused.code] ?? 0) + 1
    }
    await insertAuditRecordTx(
      trx,
      {
        actor: input.staff.identityId,
        action: 'security_outbox.dead_letters_redriven',
        subject: input.reason,
        details: { considered: redriven.considered, reissued: redriven.reissued, skipped: redriven.skipped },
      },
      now,
    )
    await remember(redriven)
    return { redriven, replayed: false }
  })
}
