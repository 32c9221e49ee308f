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

// Response bodies: `id` makes each a named component of the OpenAPI document (and a named type in client/).
export const ChallengeAccepted = z.object({ challengeExpiresAt: z.iso.datetime() }).meta({ id: 'ChallengeAccepted', description: 'Accepted for delivery (not delivered yet); the code expires at this time' })
export const SessionCreated = z.object({ token: z.string(), expiresAt: z.iso.datetime() }).meta({ id: 'SessionCreated' })
export const SignInMethodAdded = z.object({ identifier: z.string(), kind: z.enum(['email', 'phone']) }).meta({ id: 'SignInMethodAdded' })
export const ElevationCreated = z.object({ elevationToken: z.string(), expiresAt: z.iso.datetime() }).meta({ id: 'ElevationCreated' })

// A name shown in invitation emails: printable text only, so it cannot forge lines of the message.
const organizationName = z.string().trim().min(1).max(100).regex(/^[^\p{Cc}\p{Cf}]+$/u, 'must not contain control characters')
export const OrganizationRequest = z.strictObject({ name: organizationName })
export const InvitationRequest = z.strictObject({ email: z.string().min(3).max(320).describe('The address the invitation goes to') })
export const InvitationAcceptanceRequest = z.strictObject({ token: z.string().min(1).max(128).describe('The token from the #token= part of the invitation link') })
export const OrganizationCreated = z.object({ id: z.uuid() }).meta({ id: 'OrganizationCreated' })
export const InvitationAccepted = z.object({ invitationId: z.uuid(), expiresAt: z.iso.datetime() }).meta({ id: 'InvitationAccepted' })
export const MembershipCreated = z.object({ organizationId: z.uuid() }).meta({ id: 'MembershipCreated' })
