import { z } from 'zod'
import { PASSWORD_POLICY } from '../identity/password-policy.ts'

/** Request bodies, strict (unknown fields refused); the OpenAPI document is generated from these. */
const identifier = z.string().min(1).max(320).describe('An email address or an E.164 phone number (+ and 8–15 digits)')
const code = z.string().min(1).max(16).describe('The 6-digit code')
// A new password's rule is src/identity/password-policy.ts (422 weak_password / breached_password,
// not invalid_request); the schema only bounds the size. A password to check is any length up to it.
const newPassword = z
  .string()
  .max(PASSWORD_POLICY.maxLength)
  .describe(
    `At least ${PASSWORD_POLICY.minCharacters} characters (Unicode code points after NFC, a run of spaces counting once), not found in a known breach when that check is configured`,
  )
const password = z.string().min(1).max(PASSWORD_POLICY.maxLength)

export const SignUpRequest = z.strictObject({ identifier, password: newPassword })
export const ConfirmationRequest = z.strictObject({ identifier, code })
/** The password must be the one of the latest sign-up request for the identifier (pre-account hijacking). */
export const SignUpConfirmationRequest = z.strictObject({ identifier, code, password })
export const SignInRequest = z.strictObject({ identifier, password })
export const IdentifierRequest = z.strictObject({ identifier })
export const PasswordRecoveryCompletionRequest = z.strictObject({ identifier, code, newPassword })
export const StepUpRequest = z.strictObject({}).optional()
export const StepUpConfirmationRequest = z.strictObject({ code })
export const PasswordChangeRequest = z.strictObject({ currentPassword: password, newPassword })

// Response bodies: `id` makes each a named component of the OpenAPI document (and a named type in client/).
export const ChallengeAccepted = z
  .object({ challengeExpiresAt: z.iso.datetime() })
  .meta({ id: 'ChallengeAccepted', description: 'Accepted for delivery (not delivered yet); the code expires at this time' })
export const SessionCreated = z.object({ token: z.string(), expiresAt: z.iso.datetime() }).meta({ id: 'SessionCreated' })
export const SignInMethodAdded = z.object({ identifier: z.string(), kind: z.enum(['email', 'phone']) }).meta({ id: 'SignInMethodAdded' })
export const ElevationCreated = z.object({ elevationToken: z.string(), expiresAt: z.iso.datetime() }).meta({ id: 'ElevationCreated' })
export const SessionList = z
  .object({
    sessions: z.array(
      z.object({
        id: z.uuid(),
        createdAt: z.iso.datetime(),
        lastUsedAt: z.iso.datetime().describe('Marked at most once a minute'),
        expiresAt: z.iso.datetime().describe('The absolute expiry; an idle session ends 30 minutes after its last use first'),
        current: z.boolean().describe('The session of this request'),
      }),
    ),
  })
  .meta({ id: 'SessionList', description: "The caller's live sessions, newest first (at most 100); never a token" })

// A name shown in invitation emails; src/organization/organization-name.ts refuses links, addresses,
// separators and invisible characters (422 invalid_organization_name).
const organizationName = z
  .string()
  .max(400)
  .describe(
    'Plain text, 1–100 characters after NFKC normalisation: no URLs, schemes, web or e-mail addresses, line or paragraph separators, bidi controls or invisible characters',
  )
export const OrganizationRequest = z.strictObject({ name: organizationName })
export const InvitationRequest = z.strictObject({ email: z.string().min(3).max(320).describe('The address the invitation goes to') })
export const InvitationAcceptanceRequest = z.strictObject({
  token: z.string().min(1).max(128).describe('The token from the #token= part of the invitation link'),
})
export const OrganizationCreated = z.object({ id: z.uuid() }).meta({ id: 'OrganizationCreated' })
export const InvitationAccepted = z.object({ invitationId: z.uuid(), expiresAt: z.iso.datetime() }).meta({ id: 'InvitationAccepted' })
export const MembershipCreated = z.object({ organizationId: z.uuid() }).meta({ id: 'MembershipCreated' })

/** Delivery feedback (docs/delivery.md "Delivery feedback"): the staff suppression views (each provider's webhook bodies are its folder's). */
export const SuppressionPage = z.object({
  items: z.array(
    z.object({
      id: z.uuid(),
      channel: z.enum(['email', 'whatsapp', 'sms']),
      maskedDestination: z.string(),
      reason: z.enum(['permanent_bounce', 'complaint']),
      since: z.iso.datetime(),
      messageId: z.uuid().nullable(),
    }),
  ),
  pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable() }),
})
