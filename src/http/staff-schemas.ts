import { z } from 'zod'
import {
  ATTEMPT_OUTCOMES,
  CHANNELS,
  DEAD_LETTER_REASONS,
  DELIVERY_EVENTS,
  FAILURE_CLASSES,
  MESSAGE_STATES,
  PROVIDER_IDS,
  PURPOSES,
} from '../outbox/constants.ts'

/** Query, path and response schemas of the staff routes; the API document is generated from them. */
const count = z.int().min(0)
const at = z.iso.datetime()
const purpose = z.enum(PURPOSES)
const channel = z.enum(CHANNELS)
const failureClass = z.enum(FAILURE_CLASSES)
const reason = z.enum(DEAD_LETTER_REASONS)
const maskedDestination = z
  .string()
  .meta({ description: 'The destination with most characters replaced by •, masked in the database', example: 'a•••e@e•••.com' })

export const DeadLetterQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50).meta({ description: 'Items per page' }),
  after: z.string().min(1).max(200).optional().meta({ description: 'An `endCursor`: the page of older dead letters after it' }),
  before: z.string().min(1).max(200).optional().meta({ description: 'A `startCursor`: the page of newer dead letters before it' }),
})

export const MessagePath = z.object({ messageId: z.string().meta({ description: 'The message id (a uuid)' }) })

export const Backlog = z
  .object({
    states: z.object(
      Object.fromEntries(MESSAGE_STATES.map((state) => [state, count])) as Record<(typeof MESSAGE_STATES)[number], typeof count>,
    ),
    oldestDuePendingAgeSeconds: count.nullable().meta({ description: 'Age of the oldest pending message that is due; null when none is' }),
    deadLettersLast24h: z.object(
      Object.fromEntries(DEAD_LETTER_REASONS.map((name) => [name, count])) as Record<(typeof DEAD_LETTER_REASONS)[number], typeof count>,
    ),
    deliveryEventsLast24h: z
      .record(z.string(), z.record(z.string(), count))
      .meta({ description: 'Provider delivery events received in the last 24 hours, per purpose and event' }),
    queue: z
      .object({ queued: count, deferred: count, active: count, failed: count })
      .meta({ description: 'pg-boss jobs of the delivery queue' }),
    providers: z
      .array(
        z.object({
          provider: z.enum(PROVIDER_IDS),
          channel: z.enum(CHANNELS),
          state: z.enum(['up', 'probing', 'down']).meta({
            description:
              'The breaker: up (closed); down (open: held, its messages wait without spending attempts); probing (half-open: a few messages test it)',
          }),
          failureStreak: count.meta({ description: 'The provider-side failures of the window that held it (0 while up)' }),
          downSince: at.nullable(),
          nextProbeAt: at.nullable(),
          pausedUntil: at.nullable().meta({ description: "The end of the provider's throttle pause, while one runs" }),
        }),
      )
      .meta({ description: 'Each provider a worker has used, its breaker and its throttle pause' }),
  })
  .meta({ id: 'Backlog' })

export const DeadLetterPage = z
  .object({
    items: z.array(
      z.object({
        messageId: z.uuid(),
        purpose,
        channel,
        maskedDestination,
        attemptCount: count,
        reason,
        lastFailureClass: failureClass.nullable(),
        deadLetteredAt: at,
        expiresAt: at,
      }),
    ),
    pageInfo: z.object({
      hasNextPage: z.boolean(),
      hasPreviousPage: z.boolean(),
      startCursor: z.string().nullable(),
      endCursor: z.string().nullable(),
    }),
  })
  .meta({ id: 'DeadLetterPage' })

export const Reissued = z
  .object({ messageId: z.uuid(), challengeExpiresAt: at })
  .meta({ id: 'Reissued', description: 'The new message, accepted for delivery with a fresh code' })

export const MessageHistory = z
  .object({
    message: z.object({
      messageId: z.uuid(),
      purpose,
      channel,
      maskedDestination,
      locale: z.string(),
      state: z.enum(MESSAGE_STATES),
      attemptCount: count,
      createdAt: at,
      availableAt: at,
      publishedAt: at.nullable(),
      deadLetteredAt: at.nullable(),
      expiresAt: at,
    }),
    attempts: z.array(
      z.object({
        attemptNo: z.int().min(1),
        provider: z
          .enum(PROVIDER_IDS)
          .nullable()
          .meta({ description: 'The provider it went to; null for attempts recorded before providers were named' }),
        channel: z.enum(CHANNELS).meta({
          description:
            "The channel it went out on: a phone code may fall back from whatsapp to sms (the message's channel stays the one it was sealed for)",
        }),
        outcome: z.enum(ATTEMPT_OUTCOMES),
        failureClass: failureClass.nullable(),
        providerMessageId: z.string().nullable(),
        retryAfterAt: at.nullable(),
        durationMs: count,
        attemptedAt: at,
      }),
    ),
    deadLetter: z.object({ reason, lastFailureClass: failureClass.nullable(), deadLetteredAt: at }).nullable(),
    events: z
      .array(z.object({ event: z.enum(DELIVERY_EVENTS), subtype: z.string().nullable(), occurredAt: at, receivedAt: at }))
      .meta({ description: 'What the provider reported after it accepted the message' }),
  })
  .meta({ id: 'MessageHistory' })

const auditText = z.string().min(1).max(200)
export const AuditRecordQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50).meta({ description: 'Items per page' }),
  after: z.string().min(1).max(200).optional().meta({ description: 'An `endCursor`: the page of older records after it' }),
  action: auditText.optional().meta({ description: 'Only this action', example: 'security_outbox.suppression_lifted' }),
  actor: auditText
    .optional()
    .meta({ description: 'Only records by this actor (a staff identity id, `cli:<login>` or `migration:<name>`)' }),
  subject: auditText.optional().meta({ description: 'Only records about this subject (an identity, message or suppression id)' }),
  from: at.optional().meta({ description: 'Only records at or after this instant' }),
  to: at.optional().meta({ description: 'Only records before this instant' }),
})

export const AuditRecordPage = z
  .object({
    items: z.array(
      z.object({
        id: z.uuid(),
        at,
        actor: z.string(),
        action: z.string(),
        subject: z.string().nullable(),
        details: z.record(z.string(), z.unknown()).meta({ description: 'Ids, reasons and counts; never a code, token or address' }),
      }),
    ),
    pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable() }),
  })
  .meta({ id: 'AuditRecordPage' })

export const PersonRequest = z
  .strictObject({ identifier: z.string().min(1).max(320).meta({ description: 'Any identifier of the person (email or E.164 phone)' }) })
  .meta({ id: 'PersonRequest' })

export const PersonErased = z
  .object({
    tombstoneId: z
      .uuid()
      .meta({ description: 'The random id that stands for the person in what is kept (organizations, invitations sent, the audit trail)' }),
    erased: z.record(z.string(), count).meta({ description: 'Rows erased (or pseudonymised) per kind' }),
  })
  .meta({ id: 'PersonErased' })

// PostgreSQL's JSON spelling of a timestamptz (`2026-12-02T09:00:00.123456+00:00`).
const instant = z.string().meta({ description: 'An ISO 8601 instant' })
export const PersonExport = z
  .object({
    identity: z.object({ id: z.uuid(), status: z.string(), createdAt: instant }),
    identifiers: z.array(
      z.object({ kind: z.enum(['email', 'phone']), value: z.string(), verifiedAt: instant.nullable(), createdAt: instant }),
    ),
    password: z.object({ set: z.boolean(), updatedAt: instant.nullable() }),
    sessions: z.array(z.record(z.string(), z.unknown())),
    devices: z.array(z.record(z.string(), z.unknown())),
    challenges: z.array(z.record(z.string(), z.unknown())),
    messages: z.array(z.record(z.string(), z.unknown())),
    suppressions: z.array(z.record(z.string(), z.unknown())),
    memberships: z.array(z.record(z.string(), z.unknown())),
    invitations: z.array(z.record(z.string(), z.unknown())),
    staff: z.object({ grantedAt: instant, revokedAt: instant.nullable() }).nullable(),
    auditRecords: z.array(z.record(z.string(), z.unknown())),
  })
  .meta({ id: 'PersonExport', description: 'What is held about a person (GDPR Art. 15); never a code, token, password hash or envelope' })
