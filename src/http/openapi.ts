import { z } from 'zod'
import * as schemas from './schemas.ts'

type Operation = { method: 'get' | 'post' | 'delete'; path: string; summary: string; description?: string; auth?: true | 'elevated' | 'metrics'; request?: z.ZodType; status: number; response?: z.ZodType }

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
  {
    method: 'post', path: '/organizations', summary: 'Create an organization; the caller becomes its admin', auth: true, request: schemas.OrganizationRequest, status: 201, response: schemas.OrganizationCreated,
    description: 'The name is stored in its NFKC form and mailed in invitations, so a name with a URL, a scheme, www., a domain (also with look-alike or defanged dots), an e-mail address, a line or paragraph separator, a bidi control or an invisible character is refused: 422 invalid_organization_name. At most 5 organizations per identity per day: 429 organization_rate_limited with Retry-After.',
  },
  {
    method: 'post', path: '/organizations/{id}/invitations', summary: 'Invite an email address (organization admins); a join link goes to it', auth: true, request: schemas.InvitationRequest, status: 202, response: schemas.InvitationAccepted,
    description: 'Limits: 50 pending per organization (409 pending_invitation_limit); 20 per organization per hour (429 invitation_rate_limited); 50 per inviter per day across organizations (429 invitation_inviter_rate_limited); 3 per mailbox (lower-case, +tag removed) per day from one organization and 3 from one inviter (429 invitation_address_rate_limited). Every 429 carries Retry-After. No budget is shared by unrelated organizations.',
  },
  { method: 'delete', path: '/organizations/{id}/invitations/{invitationId}', summary: 'Revoke an invitation (organization admins)', auth: true, status: 204 },
  {
    method: 'post', path: '/invitations/acceptance', summary: 'Accept an invitation with the token from its link; the caller becomes a member', auth: true, request: schemas.InvitationAcceptanceRequest, status: 201, response: schemas.MembershipCreated,
    description: 'Only an identity that holds the invited email as a verified identifier can accept. A used, revoked, expired or unknown token, and a token presented by any other account (a forwarded link), get the same 422 invalid_invitation; the invitation stays pending for the invited person.',
  },
  { method: 'get', path: '/platform-admin/security-outbox/backlog', summary: 'Staff: messages per state, the lag, dead letters of the last 24 h, the queue', auth: true, status: 200, description: 'Staff only (403 not_staff). The database function checks a live staff session from the session token hash itself.' },
  { method: 'get', path: '/platform-admin/security-outbox/dead-letters', summary: 'Staff: a keyset page of dead letters, destinations masked', auth: true, status: 200, description: 'Staff only (403 not_staff); query limit (1–100), after or before (cursors). The database function checks a live staff session from the session token hash itself.' },
  {
    method: 'post', path: '/platform-admin/security-outbox/dead-letters/{messageId}/reissues', summary: 'Staff: send a fresh code for a dead-lettered message (audited)', auth: 'elevated', status: 201,
    description: 'Needs X-Elevation-Token (403 elevation_required) and Idempotency-Key (422 idempotency_key_required). Refusals (409, each its own code): reissue_refused_provider_rejected (never resend to a destination the provider refused), superseded_by_resend, challenge_expired, challenge_consumed, challenge_revoked, challenge_out_of_attempts, newer_message_exists, invitation_message, security_notice_message, own_message; 404 dead_letter_not_found.',
  },
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
      ...(operation.description ? { description: operation.description } : {}),
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
