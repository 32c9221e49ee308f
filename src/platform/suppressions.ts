import type { Knex } from 'knex'
import { requireElevationTx } from '../identity/elevation.ts'
import { DomainError, NotFoundError } from '../identity/errors.ts'
import { liftSuppressionTx, suppressionPageRows } from '../outbox/staff-functions-sql.ts'
import type { StaffSession } from './outbox-admin.ts'

type Cursor = { since: Date; id: string }
const encodeCursor = (since: Date, id: string) => Buffer.from(`${since.toISOString()}|${id}`).toString('base64url')

/** A cursor from a previous page of suppressions, or a 422. */
export function decodeSuppressionCursor(text: string): Cursor {
  const [since, id] = Buffer.from(text, 'base64url').toString('utf8').split('|')
  const date = new Date(since ?? '')
  if (!id || Number.isNaN(date.getTime()) || !/^[0-9a-f-]{36}$/.test(id))
    throw new DomainError('invalid_cursor', 'The cursor is not one this API gave out.')
  return { since: date, id }
}

/**
 * `GET /platform-admin/suppressions`: a keyset page, newest first, through `outbox.suppression_page`,
 * which checks the staff session itself and only ever returns masked destinations.
 */
export async function suppressionPage(
  db: Knex,
  input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; limit: number; after?: Cursor },
) {
  const rows = await suppressionPageRows(db, input.staff.tokenHash, input.now, {
    limit: input.limit + 1,
    ...(input.after ? { after: input.after } : {}),
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
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: last ? encodeCursor(last.since, last.id) : null },
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
