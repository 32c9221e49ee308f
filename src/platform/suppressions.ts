import type { Knex } from 'knex'
import { DomainError, ForbiddenError, NotFoundError } from '../identity/errors.ts'
import { hashToken } from '../identity/secrets.ts'
import type { SessionContext } from '../identity/sessions.ts'

type Cursor = { since: Date; id: string }
const encodeCursor = (since: Date, id: string) => Buffer.from(`${since.toISOString()}|${id}`).toString('base64url')

/** A cursor from a previous page of suppressions, or a 422. */
export function decodeSuppressionCursor(text: string): Cursor {
  const [since, id] = Buffer.from(text, 'base64url').toString('utf8').split('|')
  const date = new Date(since ?? '')
  if (!id || Number.isNaN(date.getTime()) || !/^[0-9a-f-]{36}$/.test(id)) throw new DomainError('invalid_cursor', 'The cursor is not one this API gave out.')
  return { since: date, id }
}

type SuppressionRow = { id: string; channel: string; masked_destination: string; reason: string; since: Date; message_id: string | null }

/**
 * `GET /platform-admin/suppressions`: a keyset page, newest first, through `outbox.suppression_page`,
 * which checks the staff session itself and only ever returns masked destinations.
 */
export async function suppressionPage(db: Knex, input: { sessionToken: string; now: Date; limit: number; after?: Cursor }) {
  const { rows } = await db.raw<{ rows: SuppressionRow[] }>('SELECT * FROM outbox.suppression_page(?, ?, ?, ?, ?)', [
    hashToken(input.sessionToken), input.now, input.limit + 1, input.after?.since ?? null, input.after?.id ?? null,
  ])
  const page = rows.slice(0, input.limit)
  const last = page.at(-1)
  return {
    items: page.map((row) => ({ id: row.id, channel: row.channel, maskedDestination: row.masked_destination, reason: row.reason, since: row.since.toISOString(), messageId: row.message_id })),
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: last ? encodeCursor(last.since, last.id) : null },
  }
}

/**
 * `DELETE /platform-admin/suppressions/:id` (staff with a fresh step-up elevation): the destination
 * may be sent to again. One transaction: the elevation is checked, the suppression deleted and
 * an audit record written by `outbox.lift_suppression`.
 */
export async function liftSuppression(db: Knex, input: { staff: SessionContext; sessionToken: string; elevationToken: string | undefined; id: string; now: Date }): Promise<void> {
  await db.transaction(async (trx) => {
    const elevation = input.elevationToken
      ? await trx('identity.elevations').where({ token_hash: hashToken(input.elevationToken), session_id: input.staff.sessionId, identity_id: input.staff.identityId }).andWhere('expires_at', '>', input.now).first('id')
      : undefined
    if (!elevation) throw new ForbiddenError('elevation_required', 'A fresh elevation token from step-up is required (X-Elevation-Token).')
    const { rows } = await trx.raw<{ rows: { lifted: boolean }[] }>('SELECT outbox.lift_suppression(?, ?, ?) AS lifted', [hashToken(input.sessionToken), input.now, input.id])
    if (!rows[0]?.lifted) throw new NotFoundError('suppression_not_found', 'There is no such suppression.')
  })
}
