import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import { messageHistory } from '../../platform/message-history.ts'
import { backlog, deadLetterPage, reissueDeadLetter, type ReissueDeps } from '../../platform/outbox-admin.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { idempotencyKeyOf, replayedHeaders } from '../idempotency-key.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError, problemOfDomain } from '../problem.ts'
import { Backlog, DeadLetterPage, DeadLetterQuery, MessageHistory, MessagePath, Reissued } from '../staff-schemas.ts'
import { decodePageCursor } from '../../platform/page-cursor.ts'

const REISSUE_REFUSALS = [
  'invitation_message',
  'security_notice_message',
  'reissue_refused_provider_rejected',
  'reissue_refused_decryption_failed',
  'reissue_destination_mismatch',
  'superseded_by_resend',
  'challenge_expired',
  'challenge_consumed',
  'own_message',
  'challenge_revoked',
  'challenge_out_of_attempts',
  'newer_message_exists',
  'destination_suppressed',
] as const

/** The API document's description of each route below, in the same order. */
export const platformAdminApi = apiRegistry(
  'Platform admin',
  'Staff views of the security outbox (active staff members only; `npm run staff -- grant`)',
)
const api = {
  backlog: platformAdminApi.add({
    operationId: 'getOutboxBacklog',
    method: 'get',
    path: '/platform-admin/security-outbox/backlog',
    auth: 'staff',
    summary: 'Is delivery healthy? Messages per state, the oldest due age, dead letters of the last 24 h, the queue',
    success: { status: 200, description: 'The backlog', body: Backlog },
  }),
  deadLetters: platformAdminApi.add({
    operationId: 'listDeadLetters',
    method: 'get',
    path: '/platform-admin/security-outbox/dead-letters',
    auth: 'staff',
    summary: 'A keyset page of dead letters, newest first, destinations masked',
    query: DeadLetterQuery,
    success: { status: 200, description: 'One page', body: DeadLetterPage },
    problems: { 400: ['invalid_cursor'] },
  }),
  message: platformAdminApi.add({
    operationId: 'getOutboxMessage',
    method: 'get',
    path: '/platform-admin/security-outbox/messages/:messageId',
    auth: 'staff',
    summary: "One message's history: the message (destination masked), its attempts and its dead letter",
    params: MessagePath,
    success: { status: 200, description: 'The history', body: MessageHistory },
    problems: { 404: ['message_not_found'] },
  }),
  reissue: platformAdminApi.add({
    operationId: 'reissueDeadLetter',
    method: 'post',
    path: '/platform-admin/security-outbox/dead-letters/:messageId/reissues',
    auth: 'staff-elevated',
    summary: 'Send a dead-lettered code again with a fresh code (audited, idempotent)',
    description:
      'Needs a fresh elevation token of this staff session and an Idempotency-Key. The key remembers the first answer once the request reached it — the reissue (201) or its refusal (404, 409) — and a repeat answers it again with `Idempotent-Replayed: true` and does nothing; answers given before the key is read (401, 403, 400 `idempotency_key_required`, 422 `idempotency_key_reused` for a key used on another dead letter) and failures on our side (503) are not remembered, so the repeat is tried afresh.',
    params: MessagePath,
    idempotent: true,
    success: {
      status: 201,
      description: 'Reissued (or the replay of an earlier reissue with this key)',
      body: Reissued,
    },
    problems: { 404: ['dead_letter_not_found'], 409: REISSUE_REFUSALS },
  }),
}

/** Staff views of the security outbox and the audited reissue (docs/operations.md). */
export function platformAdminRoutes({ db, reissue: deps }: { db: Knex; reissue: ReissueDeps }): Router {
  const router = apiRouter()
  const staff = [requireSession(db, deps.clock), requireStaff(db)]

  route(router, api.backlog, ...staff, async (_req, res) => {
    res.json(await backlog(db, staffSessionOf(res), deps.clock()))
  })

  route(router, api.deadLetters, ...staff, async (req, res) => {
    const query = DeadLetterQuery.parse(req.query)
    if (query.after && query.before) throw new HttpProblemError(422, 'invalid_request', 'Give `after` or `before`, not both.')
    res.json(
      await deadLetterPage(
        db,
        staffSessionOf(res),
        {
          limit: query.limit,
          after: query.after ? decodePageCursor(query.after) : undefined,
          before: query.before ? decodePageCursor(query.before) : undefined,
        },
        deps.clock(),
      ),
    )
  })

  route(router, api.message, ...staff, async (req, res) => {
    const messageId = String(req.params.messageId ?? '')
    const history = z.uuid().safeParse(messageId).success ? await messageHistory(db, staffSessionOf(res).tokenHash, messageId) : undefined
    if (!history) throw new NotFoundError('message_not_found', 'There is no such message.')
    res.json(history)
  })

  route(router, api.reissue, ...staff, async (req, res) => {
    const messageId = String(req.params.messageId ?? '')
    if (!z.uuid().safeParse(messageId).success) throw new NotFoundError('dead_letter_not_found', 'There is no such dead letter.')
    const idempotencyKey = idempotencyKeyOf(req)
    const result = await reissueDeadLetter(db, deps, {
      staff: staffSessionOf(res),
      elevationToken: req.get('x-elevation-token'),
      idempotencyKey,
      messageId,
    })
    const replayed = replayedHeaders(result.replayed)
    if ('refused' in result) {
      const problem = problemOfDomain(result.refused)
      throw new HttpProblemError(problem.status, problem.code, problem.message, { headers: { ...problem.headers, ...replayed } })
    }
    res.status(201).set(replayed).json(result.reissued)
  })

  return router
}
