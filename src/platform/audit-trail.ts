import { auditRecordPageRows, type AuditFilter } from './audit-records-sql.ts'
import type { StaffSession } from './outbox-admin.ts'
import { encodePageCursor, type PageCursor } from './page-cursor.ts'

/**
 * `GET /platform-admin/audit-records`: a keyset page of the audit trail, newest first, filtered,
 * through `platform.audit_record_page` (which checks the staff session itself).
 */
export async function auditTrailPage(
  db: Parameters<typeof auditRecordPageRows>[0],
  input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; limit: number; after?: PageCursor; filter: AuditFilter },
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
    pageInfo: { hasNextPage: rows.length > input.limit, endCursor: last ? encodePageCursor(last.at, last.id) : null },
  }
}
