import { z } from 'zod'
import {
  CHANNELS,
  DEAD_LETTER_REASONS,
  DELIVERY_EVENTS,
  FAILURE_CLASSES,
  MESSAGE_STATES,
  PROVIDER_IDS,
  PURPOSES,
} from '../outbox/constants.ts'
import { DELIVERY_COUNT_MAX_HOURS } from '../platform/provider-controls.ts'
import { REDRIVE_MAX } from '../platform/redrive.ts'

/** Request and response schemas of the console's search, counts, redrive and provider controls (src/http/routes/outbox-controls.ts). */
const count = z.int().min(0)
const at = z.iso.datetime()
const channel = z.enum(CHANNELS)

export const MessageSearch = z.strictObject({
  destination: z
    .string()
    .min(1)
    .max(320)
    .meta({ description: 'The exact email address or E.164 phone number; hashed with the key the suppression list uses, never stored' }),
  limit: z.int().min(1).max(100).default(20),
  before: z.uuid().optional().meta({ description: 'An `endCursor`: the page of older messages after it' }),
})

export const MessageSearchPage = z
  .object({
    items: z.array(
      z.object({
        messageId: z.uuid(),
        purpose: z.enum(PURPOSES),
        channel,
        maskedDestination: z.string().meta({ description: 'Masked in the database', example: 'a•••e@e•••.com' }),
        state: z.enum(MESSAGE_STATES),
        attemptCount: count,
        lastFailureClass: z.enum(FAILURE_CLASSES).nullable(),
        deadLetterReason: z.enum(DEAD_LETTER_REASONS).nullable(),
        providers: z.array(z.enum(PROVIDER_IDS)).meta({ description: 'The provider of each attempt, in order: its path' }),
        createdAt: at,
        expiresAt: at,
      }),
    ),
    pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.uuid().nullable() }),
  })
  .meta({ id: 'MessageSearchPage' })

export const DeliveryCountQuery = z.strictObject({
  hours: z.coerce
    .number()
    .int()
    .min(1)
    .max(DELIVERY_COUNT_MAX_HOURS)
    .default(24)
    .meta({ description: 'The window: the last this many hours' }),
})

export const DeliveryCounts = z
  .object({
    since: at,
    until: at,
    counts: z.array(
      z.object({
        provider: z
          .string()
          .meta({ description: 'The provider whose sent attempt the event matched (`unknown` before providers were named)' }),
        channel,
        event: z.enum(DELIVERY_EVENTS),
        count,
      }),
    ),
  })
  .meta({ id: 'DeliveryCounts' })

export const Redrive = z.strictObject({
  reason: z.enum(DEAD_LETTER_REASONS),
  limit: z.int().min(1).max(REDRIVE_MAX).default(REDRIVE_MAX),
  after: z.uuid().optional().meta({ description: 'The `endCursor` of the previous redrive: go on after it' }),
})

export const Redriven = z
  .object({
    reason: z.enum(DEAD_LETTER_REASONS),
    considered: count,
    reissued: count,
    skipped: z
      .record(z.string(), count)
      .meta({ description: 'Dead letters not reissued, by the refusal code a single reissue would answer' }),
    endCursor: z.uuid().nullable(),
    hasMore: z.boolean(),
  })
  .meta({ id: 'Redriven' })

export const ChannelPauses = z
  .object({
    items: z.array(
      z.object({
        channel,
        provider: z
          .enum(PROVIDER_IDS)
          .nullable()
          .meta({ description: "The provider paused; null for a whole channel's pause (written by a worker of the previous release)" }),
        pausedUntil: at,
        throttleStreak: count,
      }),
    ),
  })
  .meta({ id: 'ChannelPauses' })

export const Released = z
  .object({ released: count.meta({ description: "The channel's held messages called back to go out now" }) })
  .meta({ id: 'Released' })
