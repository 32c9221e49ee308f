import { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import { backlog, deadLetterPage, decodeCursor, reissueDeadLetter, type ReissueDeps } from '../../platform/outbox-admin.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { HttpProblem } from '../problem.ts'

const DeadLetterQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  after: z.string().min(1).max(200).optional(),
  before: z.string().min(1).max(200).optional(),
})
const IdempotencyKey = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')

/** Staff views of the security outbox and the audited reissue (DESIGN §8, seed 000 OX-O1, OX-O2). */
export function platformAdminRoutes({ db, reissue: deps }: { db: Knex; reissue: ReissueDeps }): Router {
  const router = Router()
  const staff = [requireSession(db, deps.clock), requireStaff(db)]

  router.get('/platform-admin/security-outbox/backlog', ...staff, async (_req, res) => {
    res.json(await backlog(db, staffSessionOf(res), deps.clock()))
  })

  router.get('/platform-admin/security-outbox/dead-letters', ...staff, async (req, res) => {
    const query = DeadLetterQuery.parse(req.query)
    if (query.after && query.before) throw new HttpProblem(422, 'invalid_request', 'Give `after` or `before`, not both.')
    res.json(await deadLetterPage(db, staffSessionOf(res), { limit: query.limit, after: query.after ? decodeCursor(query.after) : undefined, before: query.before ? decodeCursor(query.before) : undefined }, deps.clock()))
  })

  router.post('/platform-admin/security-outbox/dead-letters/:messageId/reissues', ...staff, async (req, res) => {
    const messageId = String(req.params.messageId ?? '')
    if (!z.uuid().safeParse(messageId).success) throw new NotFoundError('dead_letter_not_found', 'There is no such dead letter.')
    const key = IdempotencyKey.safeParse(req.get('idempotency-key'))
    if (!key.success) throw new HttpProblem(422, 'idempotency_key_required', 'An Idempotency-Key header (1–200 printable characters) is required.')
    const result = await reissueDeadLetter(db, deps, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), idempotencyKey: key.data, messageId })
    res.status(201).set(result.replayed ? { 'Idempotent-Replayed': 'true' } : {}).json({ messageId: result.messageId, challengeExpiresAt: result.challengeExpiresAt })
  })

  return router
}
