import { z } from 'zod'
import { parseLinkOrigin } from '../../config/link-origins.ts'
import { COURIER_PURPOSES } from '../platform/api-keys.ts'
import { ATTEMPT_OUTCOMES, CHANNELS, DEAD_LETTER_REASONS, FAILURE_CLASSES, MESSAGE_STATES } from '../outbox/constants.ts'

/** Request and response schemas of the courier API and its staff routes; the API document is generated from them. */
const purpose = z.enum(COURIER_PURPOSES)
const channel = z.enum(CHANNELS)
const at = z.iso.datetime()

export const CourierMessageBody = z.strictObject({
  purpose: purpose.meta({ description: 'What the message is for; `magic_link` carries a link, every other purpose a code' }),
  channel,
  destination: z.string().min(3).max(254).meta({ description: 'An email address, or an E.164 number for a phone channel' }),
  secret: z
    .union([
      z.strictObject({
        code: z
          .string()
          .regex(/^[A-Za-z0-9-]{4,32}$/)
          .meta({ description: '4–32 letters, digits or hyphens' }),
      }),
      z.strictObject({ link: z.string().min(10).max(2_048).meta({ description: 'An absolute https URL carrying your token' }) }),
    ])
    .meta({ description: 'Sealed the moment it arrives; never stored, logged or returned in the clear' }),
  expiresAt: z.iso
    .datetime({ offset: true })
    .meta({ description: 'When the secret stops working: in the future, at most 24 h away; never sent after it' }),
  locale: z
    .string()
    .regex(/^[a-z]{2}$/)
    .optional()
    .meta({ description: 'A shipped locale (en, de, es); otherwise the deployment default' }),
  data: z
    .strictObject({
      appName: z
        .string()
        .min(1)
        .max(100)
        .optional()
        .meta({ description: 'Your product name, shown instead of PRODUCT_NAME (no link, address or line break)' }),
    })
    .optional()
    .meta({ description: 'Non-secret display values (verification_code and magic_link only)' }),
})

export const CourierAccepted = z.object({ messageId: z.uuid() })

export const CourierMessagePath = z.object({ messageId: z.string().meta({ description: 'The id `POST /v1/messages` answered' }) })

export const CourierMessage = z.object({
  messageId: z.uuid(),
  purpose: z.string(),
  channel,
  maskedDestination: z.string().meta({ example: 'a•••e@e•••.com' }),
  state: z.enum(MESSAGE_STATES),
  attemptCount: z.int().min(0),
  createdAt: at,
  expiresAt: at,
  publishedAt: at.nullable(),
  deadLetteredAt: at.nullable(),
  deadLetterReason: z.enum(DEAD_LETTER_REASONS).nullable(),
  attempts: z.array(
    z.object({
      attemptNo: z.int().min(1),
      outcome: z.enum(ATTEMPT_OUTCOMES),
      failureClass: z.enum(FAILURE_CLASSES).nullable(),
      attemptedAt: at,
    }),
  ),
})

const linkOrigin = z
  .string()
  .max(300)
  .refine((text) => parseLinkOrigin(text) !== undefined, 'an https origin, `https://host[:port]`, without a path')
  .meta({
    description:
      'An https origin (`https://app.example.org`) a magic link may point at; compared exactly, IDN hosts in their punycode form',
  })
const sendsPerHour = z
  .int()
  .min(1)
  .max(6_000_000)
  .meta({ description: 'Messages the key may send in a clock hour; past it 429 `api_key_budget_exhausted` until the hour ends' })
const destinationsPerHour = z.int().min(1).max(6_000_000).meta({
  description:
    'Addresses the key may send to in a clock hour that it had not sent to within the hour (a leaked key cannot reach thousands)',
})
const linkOrigins = z
  .array(linkOrigin)
  .max(20)
  .meta({ description: 'Where its magic links may point: required for a key scoped to `magic_link` (none = no magic link)' })

export const NewApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(100),
  purposes: z.array(purpose).min(1).max(COURIER_PURPOSES.length),
  channels: z.array(channel).min(1).max(CHANNELS.length),
  requestsPerMinute: z.int().min(1).max(100_000).default(600),
  perDestinationPerHour: z.int().min(1).max(1_000).default(5),
  perDestinationPerDay: z.int().min(1).max(10_000).default(20),
  sendsPerHour: sendsPerHour.default(1_000),
  destinationsPerHour: destinationsPerHour.default(100),
  linkOrigins: linkOrigins.default([]),
})

/** `POST /platform-admin/api-keys/{id}/changes`: a live key's budgets and link origins (at least one of them). */
export const ApiKeyChangeBody = z
  .strictObject({
    sendsPerHour: sendsPerHour.optional(),
    destinationsPerHour: destinationsPerHour.optional(),
    linkOrigins: linkOrigins.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, 'name at least one of sendsPerHour, destinationsPerHour, linkOrigins')

export const ApiKeyPath = z.object({ id: z.string().meta({ description: 'The API key id (a uuid)' }) })

export const CreatedApiKey = z.object({
  id: z.uuid(),
  key: z.string().meta({ description: 'The key itself (`sp_live_…`): shown in this answer only, stored as a hash' }),
})

export const ApiKeyList = z.object({
  items: z.array(
    z.object({
      id: z.uuid(),
      name: z.string(),
      purposes: z.array(purpose),
      channels: z.array(channel),
      requestsPerMinute: z.int(),
      perDestinationPerHour: z.int(),
      perDestinationPerDay: z.int(),
      sendsPerHour: z.int(),
      destinationsPerHour: z.int(),
      linkOrigins: z.array(z.string()),
      createdBy: z.uuid(),
      createdAt: at,
      revokedAt: at.nullable(),
      lastUsedAt: at.nullable(),
      replaces: z.uuid().nullable().meta({ description: 'The key this one replaced by rotation' }),
    }),
  ),
})
