import type { Router } from 'express'
import type { Knex } from 'knex'
import { parseIdentifier, type Identifier } from '../../identity/identifiers.ts'
import { erasePersonAsStaff, exportPersonAsStaff, type PeopleDeps } from '../../platform/people.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError } from '../problem.ts'
import { PersonErased, PersonExport, PersonRequest } from '../staff-schemas.ts'

/** The API document's description of each route below, in the same order. */
export const peopleApi = apiRegistry(
  'People',
  'Per-person export and erasure, GDPR Art. 15 and 17 (docs/privacy.md); staff with step-up, audited',
)
const api = {
  export: peopleApi.add({
    operationId: 'exportPerson',
    method: 'post',
    path: '/platform-admin/people/exports',
    auth: 'staff-elevated',
    summary: 'Everything held about the person behind an identifier, as JSON (audited)',
    description: 'A POST so the identifier travels in the body, never in a URL an access log keeps.',
    body: PersonRequest,
    success: { status: 200, description: 'The export', body: PersonExport },
    problems: { 404: ['person_not_found'], 422: ['invalid_identifier'] },
  }),
  erase: peopleApi.add({
    operationId: 'erasePerson',
    method: 'post',
    path: '/platform-admin/people/erasures',
    auth: 'staff-elevated',
    summary: 'Erase the person behind an identifier, in one transaction (audited under a random tombstone id)',
    body: PersonRequest,
    success: { status: 200, description: 'Erased', body: PersonErased },
    problems: { 404: ['person_not_found'], 409: ['own_identity', 'staff_member', 'sole_admin'], 422: ['invalid_identifier'] },
  }),
}

function identifierFrom(body: unknown): Identifier {
  const identifier = parseIdentifier(PersonRequest.parse(body).identifier)
  if (!identifier)
    throw new HttpProblemError(422, 'invalid_identifier', 'The identifier must be an email address or an E.164 phone number.')
  return identifier
}

/** Staff export and erasure of one person (docs/privacy.md). */
export function peopleRoutes({ db, people }: { db: Knex; people: PeopleDeps }): Router {
  const router = apiRouter()
  const staff = [requireSession(db, people.clock), requireStaff(db)]

  route(router, api.export, ...staff, async (req, res) => {
    const identifier = identifierFrom(req.body)
    res.json(
      await exportPersonAsStaff(db, people, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), identifier }),
    )
  })

  route(router, api.erase, ...staff, async (req, res) => {
    const identifier = identifierFrom(req.body)
    res.json(await erasePersonAsStaff(db, people, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), identifier }))
  })

  return router
}
