import type { Knex } from 'knex'
import { requireElevationTx } from '../identity/elevation.ts'
import { NotFoundError } from '../identity/errors.ts'
import { liftSuppressionTx, suppressionPageRows } from '../outbox/staff-functions-sql.ts'
import type { StaffSession } from './outbox-admin.ts'
import { encodePageCursor, type PageCursor } from './page-cursor.ts'

/**
 * `GET /platform-admin/suppressions`: a keyset page, newest first, through `outbox.suppression_page`,
 * which checks the staff session itself and only ever returns masked destinations.
 */
export async function suppressionPage(
  db: Knex,
  input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; limit: number; after?: PageCursor },
) {
  const rows = await suppressionPageRows(db, input.staff.tokenHash, input.now, {
    limit: input.limit + 1,
    ...(input.after ? { after: { since: input.after.at, id: input.after.id } } : {}),
  })
  const page = rows.slice(0, input.limit)
  const last = page.at(-1)
  return {
    items: page.map((row) => ({
      id: row.id,
      channel: row.channel,
      maskedDestination: row.masked_destination,
      reason: row.reason,
      since: row.since.toISOString(),
      messageId: row.message_id,
    })),
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: last ? encodePageCursor(last.since, last.id) : null },
  }
}

/**
 * `DELETE /platform-admin/suppressions/:id` (staff with a fresh step-up elevation): the destination
 * may be sent to again. One transaction: the elevation is checked, the suppression deleted and
 * an audit record written by `outbox.lift_suppression`.
 */
export async function liftSuppression(
  db: Knex,
  input: { staff: StaffSession; elevationToken: string | undefined; id: string; now: Date },
): Promise<void> {
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    if (!(await liftSuppressionTx(trx, input.staff.tokenHash, input.now, input.id)))
      throw new NotFoundError('suppression_not_found', 'There is no such suppression.')
  })
}
