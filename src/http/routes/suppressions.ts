import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import { liftSuppression, suppressionPage } from '../../platform/suppressions.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { SuppressionPage } from '../schemas.ts'
import { decodePageCursor } from '../../platform/page-cursor.ts'

export const SuppressionQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  after: z.string().min(1).max(200).optional(),
})

/** The API document's description of each route below, in the same order. */
export const suppressionApi = apiRegistry(
  'Suppressions',
  'Destinations that bounced permanently or complained: the staff list (masked) and lifting an entry (audited)',
)
const api = {
  list: suppressionApi.add({
    operationId: 'listSuppressions',
    method: 'get',
    path: '/platform-admin/suppressions',
    auth: 'staff',
    summary: 'Suppressed destinations, masked, newest first (keyset pages)',
    query: SuppressionQuery,
    success: { status: 200, description: 'One page', body: SuppressionPage },
    problems: { 400: ['invalid_cursor'] },
  }),
  lift: suppressionApi.add({
    operationId: 'liftSuppression',
    method: 'delete',
    path: '/platform-admin/suppressions/:id',
    auth: 'staff-elevated',
    summary: 'Lift a suppression (audited): messages to the destination are sent again',
    params: z.object({ id: z.string().meta({ description: 'The suppression id (a uuid)' }) }),
    success: { status: 204, description: 'Lifted' },
    problems: { 404: ['suppression_not_found'] },
  }),
}

/** Staff views of the suppression list (docs/delivery.md "Delivery feedback"): masked, keyset-paged; lifting needs step-up. */
export function suppressionRoutes({ db, clock }: { db: Knex; clock: () => Date }): Router {
  const router = apiRouter()
  const staff = [requireSession(db, clock), requireStaff(db)]

  route(router, api.list, ...staff, async (req, res) => {
    const query = SuppressionQuery.parse(req.query)
    res.json(
      await suppressionPage(db, {
        staff: staffSessionOf(res),
        now: clock(),
        limit: query.limit,
        after: query.after ? decodePageCursor(query.after) : undefined,
      }),
    )
  })

  route(router, api.lift, ...staff, async (req, res) => {
    const id = String(req.params.id ?? '')
    if (!z.uuid().safeParse(id).success) throw new NotFoundError('suppression_not_found', 'There is no such suppression.')
    await liftSuppression(db, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), id, now: clock() })
    res.status(204).end()
  })

  return router
}
