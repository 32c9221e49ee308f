import { z } from 'zod'
import * as schemas from './schemas.ts'

type Operation = { method: 'get' | 'post' | 'delete'; path: string; summary: string; auth?: true; request?: z.ZodType; requestType?: string; status: number; response?: z.ZodType }

const OPERATIONS: Operation[] = [
  { method: 'post', path: '/sign-ups', summary: 'Start a sign-up: a code goes to the identifier', request: schemas.SignUpRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/sign-ups/confirmation', summary: 'Confirm a sign-up with its code', request: schemas.ConfirmationRequest, status: 201, response: schemas.SessionCreated },
  { method: 'post', path: '/sessions', summary: 'Sign in', request: schemas.SignInRequest, status: 201, response: schemas.SessionCreated },
  { method: 'delete', path: '/sessions/current', summary: 'Sign out', auth: true, status: 204 },
  { method: 'post', path: '/sign-in-methods', summary: 'Add a sign-in method: a code goes to it', auth: true, request: schemas.IdentifierRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/sign-in-methods/confirmation', summary: 'Confirm a new sign-in method', auth: true, request: schemas.ConfirmationRequest, status: 201, response: schemas.SignInMethodAdded },
  { method: 'post', path: '/password-recoveries', summary: 'Ask for a recovery code (same answer for unknown identifiers)', request: schemas.IdentifierRequest, status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/password-recoveries/completion', summary: 'Set a new password with the recovery code; revokes every session', request: schemas.PasswordRecoveryCompletionRequest, status: 204 },
  { method: 'post', path: '/step-ups', summary: 'Ask for a step-up code', auth: true, request: z.strictObject({}), status: 202, response: schemas.ChallengeAccepted },
  { method: 'post', path: '/step-ups/confirmation', summary: 'Exchange the step-up code for an elevation token (5 minutes)', auth: true, request: schemas.StepUpConfirmationRequest, status: 201, response: schemas.ElevationCreated },
  { method: 'post', path: '/organizations', summary: 'Create an organization; the caller becomes its admin', auth: true, request: schemas.OrganizationRequest, status: 201, response: schemas.OrganizationCreated },
  { method: 'post', path: '/organizations/{id}/invitations', summary: 'Invite an email address (organization admins); a join link goes to it', auth: true, request: schemas.InvitationRequest, status: 202, response: schemas.InvitationAccepted },
  { method: 'delete', path: '/organizations/{id}/invitations/{invitationId}', summary: 'Revoke an invitation (organization admins)', auth: true, status: 204 },
  { method: 'post', path: '/invitations/acceptance', summary: 'Accept an invitation with the token from its link; the caller becomes a member', auth: true, request: schemas.InvitationAcceptanceRequest, status: 201, response: schemas.MembershipCreated },
  { method: 'post', path: '/webhooks/ses', summary: 'Amazon SNS deliveries of SES events (signature verified; SubscriptionConfirmation only for SES_EVENTS_TOPIC_ARN); 403 for a bad signature, certificate URL, topic or a message over an hour old', request: schemas.SnsDelivery, requestType: 'text/plain', status: 200, response: schemas.SesWebhookAnswer },
  { method: 'post', path: '/webhooks/wasender', summary: 'Wasender message status updates (X-Webhook-Signature = WASENDER_WEBHOOK_SECRET, else 403)', request: schemas.WasenderStatusUpdate, status: 200, response: schemas.WasenderWebhookAnswer },
  { method: 'get', path: '/platform-admin/suppressions', summary: 'Staff: suppressed destinations, masked, newest first (?limit=1–100&after=<endCursor>)', auth: true, status: 200, response: schemas.SuppressionPage },
  { method: 'delete', path: '/platform-admin/suppressions/{id}', summary: 'Staff with X-Elevation-Token: lift a suppression (audited)', auth: true, status: 204 },
  { method: 'get', path: '/healthz', summary: 'Liveness', status: 200 },
  { method: 'get', path: '/readyz', summary: 'Readiness: 503 when the database is unreachable', status: 200 },
]

const problem = { description: 'RFC 9457 problem', content: { 'application/problem+json': { schema: { type: 'object', properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' }, code: { type: 'string' } }, required: ['status', 'code'] } } } }

/** The OpenAPI 3.1 document, generated from the same zod schemas the routes validate with. */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const operation of OPERATIONS) {
    paths[operation.path] ??= {}
    paths[operation.path]![operation.method] = {
      summary: operation.summary,
      ...(operation.auth ? { security: [{ bearer: [] }] } : {}),
      ...(operation.request ? { requestBody: { required: true, content: { [operation.requestType ?? 'application/json']: { schema: z.toJSONSchema(operation.request, { io: 'input' }) } } } } : {}),
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
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    paths,
  }
}
