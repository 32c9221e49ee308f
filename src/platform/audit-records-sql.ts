import type { Knex } from 'knex'

/** One row of `platform.audit_record_page`: who did what to which subject; never a secret (migration 20261202001500). */
export type AuditRecordRow = {
  id: string
  at: Date
  actor: string
  action: string
  subject: string | null
  details: Record<string, unknown>
}

/** What a page of the audit trail is filtered by; every field optional. */
export type AuditFilter = { action?: string; actor?: string; subject?: string; from?: Date; to?: Date }

/**
 * A keyset page of audit records, newest first by (at, id), through the staff function that checks
 * the session itself (42501 otherwise); `after` is the last row of the previous page.
 */
export async function auditRecordPageRows(
  db: Knex,
  sessionTokenHash: Buffer,
  now: Date,
  page: { limit: number; after?: { at: Date; id: string }; filter: AuditFilter },
): Promise<AuditRecordRow[]> {
  const { rows } = await db.raw<{ rows: AuditRecordRow[] }>('SELECT * FROM platform.audit_record_page(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', [
    sessionTokenHash,
    now,
    page.limit,
    page.after?.at ?? null,
    page.after?.id ?? null,
    page.filter.action ?? null,
    page.filter.actor ?? null,
    page.filter.subject ?? null,
    page.filter.from ?? null,
    page.filter.to ?? null,
  ])
  return rows
}
