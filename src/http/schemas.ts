import { z } from 'zod'

/** Request bodies, strict (unknown fields refused); the OpenAPI document is generated from these. */
const identifier = z.string().min(1).max(320).describe('An email address or an E.164 phone number (+ and 8–15 digits)')
const code = z.string().min(1).max(16).describe('The 6-digit code')
const password = z.string().min(10).max(200)

export const SignUpRequest = z.strictObject({ identifier, password })
export const ConfirmationRequest = z.strictObject({ identifier, code })
export const SignInRequest = z.strictObject({ identifier, password: z.string().min(1).max(200) })
export const IdentifierRequest = z.strictObject({ identifier })
export const PasswordRecoveryCompletionRequest = z.strictObject({ identifier, code, newPassword: password })
export const StepUpRequest = z.strictObject({}).optional()
export const StepUpConfirmationRequest = z.strictObject({ code })

export const ChallengeAccepted = z.object({ challengeExpiresAt: z.iso.datetime() })
export const SessionCreated = z.object({ token: z.string(), expiresAt: z.iso.datetime() })
export const SignInMethodAdded = z.object({ identifier: z.string(), kind: z.enum(['email', 'phone']) })
export const ElevationCreated = z.object({ elevationToken: z.string(), expiresAt: z.iso.datetime() })

// A name shown in invitation emails: printable text only, so it cannot forge lines of the message.
const organizationName = z.string().trim().min(1).max(100).regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters')
export const OrganizationRequest = z.strictObject({ name: organizationName })
export const InvitationRequest = z.strictObject({ email: z.string().min(3).max(320).describe('The address the invitation goes to') })
export const InvitationAcceptanceRequest = z.strictObject({ token: z.string().min(1).max(128).describe('The token from the #token= part of the invitation link') })
export const OrganizationCreated = z.object({ id: z.uuid() })
export const InvitationAccepted = z.object({ invitationId: z.uuid(), expiresAt: z.iso.datetime() })
export const MembershipCreated = z.object({ organizationId: z.uuid() })

/** Delivery feedback (DESIGN §12): the webhooks' answers and the staff suppression views. */
export const SnsDelivery = z.object({
  Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
  MessageId: z.string(), TopicArn: z.string(), Message: z.string(), Timestamp: z.string(),
  SignatureVersion: z.enum(['1', '2']), Signature: z.string(), SigningCertURL: z.string(),
  Subject: z.string().optional(), SubscribeURL: z.string().optional(), Token: z.string().optional(),
}).describe('An Amazon SNS HTTP(S) delivery, posted as text/plain JSON with an x-amz-sns-message-type header')
export const WasenderStatusUpdate = z.object({
  event: z.string().describe('messages.update; other events are ignored'),
  data: z.unknown().describe('{key: {id}, update: {status}} or a list of them'),
  timestamp: z.number().optional(),
}).describe('Wasender webhook; X-Webhook-Signature must equal WASENDER_WEBHOOK_SECRET')
const webhookOutcome = z.enum(['stored', 'duplicate', 'unknown_message', 'ignored', 'subscription_confirmed'])
export const SesWebhookAnswer = z.object({ outcome: webhookOutcome })
export const WasenderWebhookAnswer = z.object({ outcomes: z.array(webhookOutcome) })
export const SuppressionPage = z.object({
  items: z.array(z.object({
    id: z.uuid(), channel: z.enum(['email', 'whatsapp']), maskedDestination: z.string(), reason: z.enum(['permanent_bounce', 'complaint']),
    since: z.iso.datetime(), messageId: z.uuid().nullable(),
  })),
  pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable() }),
})
