import { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { parseIdentifier } from '../../identity/identifiers.ts'
import { acceptInvitation, createOrganization, invitationNotFound, inviteTx, notOrganizationAdmin, revokeInvitation, type InvitationDeps } from '../../organization/invitations.ts'
import { requireSession, sessionOf } from '../auth.ts'
import { HttpProblem } from '../problem.ts'
import { localeOf } from '../locale.ts'
import { InvitationAcceptanceRequest, InvitationRequest, OrganizationRequest } from '../schemas.ts'

const uuid = z.uuid()
const param = (params: Record<string, string | string[] | undefined>, name: string): string => String(params[name] ?? '')

/** A path id that is not a uuid names no organization the caller administers: the same 403. */
function organizationIdFrom(raw: string | undefined): string {
  if (!uuid.safeParse(raw).success) throw notOrganizationAdmin()
  return raw!
}

/** Organizations and invitations (DESIGN §8, seed 000 OB12). */
export function organizationRoutes({ db, invitations: deps }: { db: Knex; invitations: InvitationDeps }): Router {
  const router = Router()
  const signedIn = requireSession(db, deps.clock)

  router.post('/organizations', signedIn, async (req, res) => {
    const body = OrganizationRequest.parse(req.body)
    const { id } = await createOrganization(db, sessionOf(res).identityId, body.name)
    res.status(201).json({ id })
  })

  router.post('/organizations/:id/invitations', signedIn, async (req, res) => {
    const organizationId = organizationIdFrom(param(req.params, 'id'))
    const body = InvitationRequest.parse(req.body)
    const email = parseIdentifier(body.email)
    if (email?.kind !== 'email') throw new HttpProblem(422, 'invalid_email', 'Invitations go to an email address.')
    const { invitationId, expiresAt } = await db.transaction((trx) => inviteTx(trx, deps, { organizationId, inviterId: sessionOf(res).identityId, email: email.value, locale: localeOf(res) }))
    res.status(202).json({ invitationId, expiresAt: expiresAt.toISOString() })
  })

  router.delete('/organizations/:id/invitations/:invitationId', signedIn, async (req, res) => {
    const organizationId = organizationIdFrom(param(req.params, 'id'))
    const invitationId = param(req.params, 'invitationId')
    if (!uuid.safeParse(invitationId).success) throw invitationNotFound()
    await revokeInvitation(db, { organizationId, invitationId, identityId: sessionOf(res).identityId }, deps.clock())
    res.status(204).end()
  })

  router.post('/invitations/acceptance', signedIn, async (req, res) => {
    const body = InvitationAcceptanceRequest.parse(req.body)
    const { organizationId } = await acceptInvitation(db, { identityId: sessionOf(res).identityId, token: body.token }, deps.clock())
    res.status(201).json({ organizationId })
  })

  return router
}
