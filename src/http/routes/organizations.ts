import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { parseIdentifier } from '../../identity/identifiers.ts'
import {
  acceptInvitation,
  createOrganization,
  invitationNotFound,
  inviteTx,
  notOrganizationAdmin,
  revokeInvitation,
  type InvitationDeps,
} from '../../organization/invitations.ts'
import { requireSession, sessionOf } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError } from '../problem.ts'
import { localeOf } from '../locale.ts'
import {
  InvitationAccepted,
  InvitationAcceptanceRequest,
  InvitationRequest,
  MembershipCreated,
  OrganizationCreated,
  OrganizationRequest,
} from '../schemas.ts'

const uuid = z.uuid()
const param = (params: Record<string, string | string[] | undefined>, name: string): string => String(params[name] ?? '')

/** A path id that is not a uuid names no organization the caller administers: the same 403. */
function organizationIdFrom(raw: string | undefined): string {
  if (!uuid.safeParse(raw).success) throw notOrganizationAdmin()
  return raw!
}

const OrganizationPath = z.object({
  id: z
    .string()
    .meta({ description: 'The organization id (a uuid; anything else answers 403 like an organization you do not administer)' }),
})
const InvitationPath = OrganizationPath.extend({ invitationId: z.string().meta({ description: 'The invitation id (a uuid)' }) })

/** The API document's description of each route below, in the same order. */
export const organizationApi = apiRegistry('Organizations', 'Organizations, invitations and their acceptance')
const api = {
  createOrganization: organizationApi.add({
    operationId: 'createOrganization',
    method: 'post',
    path: '/organizations',
    auth: 'bearer',
    summary: 'Create an organization; the caller becomes its admin',
    description:
      'The name is stored in its NFKC form and mailed in invitations, so a name with a URL, a scheme, www., a domain (also with look-alike or defanged dots), an e-mail address, a line or paragraph separator, a bidi control or an invisible character is refused. At most 5 organizations per identity per day.',
    body: OrganizationRequest,
    success: { status: 201, description: 'Created', body: OrganizationCreated },
    problems: { 422: ['invalid_organization_name'], 429: ['organization_rate_limited'] },
  }),
  invite: organizationApi.add({
    operationId: 'inviteToOrganization',
    method: 'post',
    path: '/organizations/:id/invitations',
    auth: 'bearer',
    summary: 'Invite an email address (organization admins); a join link goes to it',
    params: OrganizationPath,
    body: InvitationRequest,
    success: { status: 202, description: 'Accepted: the invitation email is on its way', body: InvitationAccepted },
    problems: {
      403: ['not_organization_admin'],
      409: ['pending_invitation_limit'],
      422: ['invalid_email'],
      429: ['invitation_rate_limited', 'invitation_address_rate_limited', 'invitation_inviter_rate_limited', 'rate_limited'],
    },
  }),
  revoke: organizationApi.add({
    operationId: 'revokeInvitation',
    method: 'delete',
    path: '/organizations/:id/invitations/:invitationId',
    auth: 'bearer',
    summary: 'Revoke an invitation (organization admins); its unsent message is dead-lettered',
    params: InvitationPath,
    success: { status: 204, description: 'Revoked' },
    problems: { 403: ['not_organization_admin'], 404: ['invitation_not_found'], 409: ['invitation_accepted'] },
  }),
  accept: organizationApi.add({
    operationId: 'acceptInvitation',
    method: 'post',
    path: '/invitations/acceptance',
    auth: 'bearer',
    description:
      'Only an identity that holds the invited email as a verified identifier can accept; a forwarded link answers the same 422 invalid_invitation as a used, revoked or expired token.',
    summary: 'Accept an invitation with the token from its link; the caller becomes a member',
    body: InvitationAcceptanceRequest,
    success: { status: 201, description: 'Now a member', body: MembershipCreated },
    problems: { 422: ['invalid_invitation'] },
  }),
}

/** Organizations and invitations: thin routes over src/organization (its limits: docs/architecture.md §7, budgets). */
export function organizationRoutes({ db, invitations: deps }: { db: Knex; invitations: InvitationDeps }): Router {
  const router = apiRouter()
  const signedIn = requireSession(db, deps.clock)

  route(router, api.createOrganization, signedIn, async (req, res) => {
    const body = OrganizationRequest.parse(req.body)
    const { id } = await createOrganization(db, deps, sessionOf(res).identityId, body.name)
    res.status(201).json({ id })
  })

  route(router, api.invite, signedIn, async (req, res) => {
    const organizationId = organizationIdFrom(param(req.params, 'id'))
    const body = InvitationRequest.parse(req.body)
    const email = parseIdentifier(body.email)
    if (email?.kind !== 'email') throw new HttpProblemError(422, 'invalid_email', 'Invitations go to an email address.')
    const { invitationId, expiresAt } = await db.transaction((trx) =>
      inviteTx(trx, deps, { organizationId, inviterId: sessionOf(res).identityId, email: email.value, locale: localeOf(res) }),
    )
    res.status(202).json({ invitationId, expiresAt: expiresAt.toISOString() })
  })

  route(router, api.revoke, signedIn, async (req, res) => {
    const organizationId = organizationIdFrom(param(req.params, 'id'))
    const invitationId = param(req.params, 'invitationId')
    if (!uuid.safeParse(invitationId).success) throw invitationNotFound()
    await revokeInvitation(db, { organizationId, invitationId, identityId: sessionOf(res).identityId }, deps.clock())
    res.status(204).end()
  })

  route(router, api.accept, signedIn, async (req, res) => {
    const body = InvitationAcceptanceRequest.parse(req.body)
    const { organizationId } = await acceptInvitation(db, { identityId: sessionOf(res).identityId, token: body.token }, deps.clock())
    res.status(201).json({ organizationId })
  })

  return router
}
