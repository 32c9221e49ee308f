import type { Router } from 'express'
import type { Knex } from 'knex'
import { auditTrailPage } from '../../platform/audit-trail.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError } from '../problem.ts'
import { AuditRecordPage, AuditRecordQuery } from '../staff-schemas.ts'
import { decodePageCursor } from '../../platform/page-cursor.ts'

/** The API document's description of each route below, in the same order. */
export const auditRecordApi = apiRegistry(
  'Audit trail',
  'What staff and operators did, to what, and when (docs/operations.md "Audit trail")',
)
const api = {
  list: auditRecordApi.add({
    operationId: 'listAuditRecords',
    method: 'get',
    path: '/platform-admin/audit-records',
    auth: 'staff',
    summary: 'A keyset page of audit records, newest first, filtered by action, actor, subject and time',
    query: AuditRecordQuery,
    success: { status: 200, description: 'One page', body: AuditRecordPage },
    problems: { 400: ['invalid_cursor'] },
  }),
}

/** `GET /platform-admin/audit-records`: the audit trail, read through `platform.audit_record_page`. */
export function auditRecordRoutes({ db, clock }: { db: Knex; clock: () => Date }): Router {
  const router = apiRouter()
  route(router, api.list, requireSession(db, clock), requireStaff(db), async (req, res) => {
    const query = AuditRecordQuery.parse(req.query)
    const from = query.from ? new Date(query.from) : undefined
    const to = query.to ? new Date(query.to) : undefined
    if (from && to && from.getTime() >= to.getTime()) throw new HttpProblemError(422, 'invalid_request', '`from` must be before `to`.')
    res.json(
      await auditTrailPage(db, {
        staff: staffSessionOf(res),
        now: clock(),
        limit: query.limit,
        ...(query.after ? { after: decodePageCursor(query.after) } : {}),
        filter: { action: query.action, actor: query.actor, subject: query.subject, from, to },
      }),
    )
  })
  return router
}
