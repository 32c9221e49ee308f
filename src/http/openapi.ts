import { z } from 'zod'
import * as schemas from './schemas.ts'

type Operation = { method: 'get' | 'post' | 'delete'; path: string; summary: string; auth?: true | 'elevated' | 'metrics'; request?: z.ZodType; status: number; response?: z.ZodType }

const OPERATIONS: Operation[] = [
  { method: 'post', path: '/sign-ups', summary: 'Start a sign-up: a code goes to the identifier', request: schemas.SignUpRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/sign-ups/confirmation', summary: 'Confirm a sign-up with its code and the password of the latest sign-up request (a mismatch is 422 invalid_code)', request: schemas.SignUpConfirmationRequest, status: 201, response: schemas.SessionCreated },
  { method: 'post', path: '/sessions', summary: 'Sign in', request: schemas.SignInRequest, status: 201, response: schemas.SessionCreated },
  { method: 'delete', path: '/sessions/current', summary: 'Sign out', auth: true, status: 204 },
  { method: 'post', path: '/sign-in-methods', summary: 'Add a sign-in method: a code goes to it (needs X-Elevation-Token from a fresh step-up; 403 elevation_required otherwise)', auth: 'elevated', request: schemas.IdentifierRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/sign-in-methods/confirmation', summary: 'Confirm a new sign-in method; the identity’s other verified identifiers get a security notice', auth: true, request: schemas.ConfirmationRequest, status: 201, response: schemas.SignInMethodAdded },
  { method: 'post', path: '/password-recoveries', summary: 'Ask for a recovery code (same answer for unknown identifiers)', request: schemas.IdentifierRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/password-recoveries/completion', summary: 'Set a new password with the recovery code; revokes every session and notifies the other verified identifiers', request: schemas.PasswordRecoveryCompletionRequest, status: 204 },
  { method: 'post', path: '/step-ups', summary: 'Ask for a step-up code', auth: true, request: z.strictObject({}), status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/step-ups/confirmation', summary: 'Exchange the step-up code for an elevation token (5 minutes)', auth: true, request: schemas.StepUpConfirmationRequest, status: 201, response: schemas.ElevationCreated },
  { method: 'post', path: '/organizations', summary: 'Create an organization; the caller becomes its admin', auth: true, request: schemas.OrganizationRequest, status: 201, response: schemas.OrganizationCreated },
  { method: 'post', path: '/organizations/{id}/invitations', summary: 'Invite an email address (organization admins); a join link goes to it', auth: true, request: schemas.InvitationRequest, status: 202, response: schemas.InvitationAccepted },
  { method: 'delete', path: '/organizations/{id}/invitations/{invitationId}', summary: 'Revoke an invitation (organization admins)', auth: true, status: 204 },
  { method: 'post', path: '/invitations/acceptance', summary: 'Accept an invitation with the token from its link; the caller becomes a member', auth: true, request: schemas.InvitationAcceptanceRequest, status: 201, response: schemas.MembershipCreated },
  { method: 'get', path: '/healthz', summary: 'Liveness', status: 200 },
  { method: 'get', path: '/readyz', summary: 'Readiness: 503 when the database is unreachable', status: 200 },
  { method: 'get', path: '/metrics', summary: 'Prometheus metrics: needs Bearer METRICS_TOKEN; without the token served only in development and test (404 elsewhere)', auth: 'metrics', status: 200 },
]

const SECURITY = { true: [{ bearer: [] }], elevated: [{ bearer: [], elevation: [] }], metrics: [{ metricsToken: [] }] } as const

const problem = { description: 'RFC 9457 problem', content: { 'application/problem+json': { schema: { type: 'object', properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' }, code: { type: 'string' } }, required: ['status', 'code'] } } } }

/** The OpenAPI 3.1 document, generated from the same zod schemas the routes validate with. */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const operation of OPERATIONS) {
    paths[operation.path] ??= {}
    paths[operation.path]![operation.method] = {
      summary: operation.summary,
      ...(operation.auth ? { security: SECURITY[operation.auth === true ? 'true' : operation.auth] } : {}),
      ...(operation.request ? { requestBody: { required: true, content: { 'application/json': { schema: z.toJSONSchema(operation.request, { io: 'input' }) } } } } : {}),
      responses: {
        [operation.status]: operation.response
          ? { description: 'Success', content: { 'application/json': { schema: z.toJSONSchema(operation.response) } } }
          : { description: 'Success' },
        '4XX': problem,
        '503': problem,
      },
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Sealpost', version: '0.1.0', description: 'Transactional outbox for security messages' },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A session token from POST /sessions or a sign-up confirmation' },
        elevation: { type: 'apiKey', in: 'header', name: 'X-Elevation-Token', description: 'An elevation token of the same session from POST /step-ups/confirmation (5 minutes)' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN' },
      },
    },
    paths,
  }
}
