import { DomainError } from '../identity/errors.ts'
import { auditRecordPageRows, type AuditFilter } from './audit-records-sql.ts'
import type { StaffSession } from './outbox-admin.ts'

type Cursor = { at: Date; id: string }
const encodeCursor = (at: Date, id: string) => Buffer.from(`${at.toISOString()}|${id}`).toString('base64url')

/** A cursor from a previous page of the audit trail, or `invalid_cursor`. */
export function decodeAuditCursor(text: string): Cursor {
  const [at, id] = Buffer.from(text, 'base64url').toString('utf8').split('|')
  const date = new Date(at ?? '')
  if (!id || Number.isNaN(date.getTime()) || !/^[0-9a-f-]{36}$/.test(id))
    throw new DomainError('invalid_cursor', 'The cursor is not one this API gave out.')
  return { at: date, id }
}

/**
 * `GET /platform-admin/audit-records`: a keyset page of the audit trail, newest first, filtered,
 * through `platform.audit_record_page` (which checks the staff session itself).
 */
export async function auditTrailPage(
  db: Parameters<typeof auditRecordPageRows>[0],
  input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; limit: number; after?: Cursor; filter: AuditFilter },
) {
  const rows = await auditRecordPageRows(db, input.staff.tokenHash, input.now, {
    limit: input.limit + 1,
    filter: input.filter,
    ...(input.after ? { after: input.after } : {}),
  })
  const page = rows.slice(0, input.limit)
  const last = page.at(-1)
  return {
    items: page.map((row) => ({
      id: row.id,
      at: row.at.toISOString(),
      actor: row.actor,
      action: row.action,
      subject: row.subject,
      details: row.details,
    })),
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: last ? encodeCursor(last.at, last.id) : null },
  }
}
