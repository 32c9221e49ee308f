import { z } from 'zod'
import { EVENT_TYPES } from '../platform/event-types.ts'

/** Request and response schemas of the staff webhook-endpoint routes; the API document is generated from them. */
const at = z.iso.datetime()
const eventType = z.enum(EVENT_TYPES)

export const WebhookEndpointRequest = z.strictObject({
  url: z
    .string()
    .min(1)
    .max(2048)
    .meta({ description: 'https URL of the receiver (http only to an allow-listed host outside production)' }),
  events: z.array(eventType).min(1).max(EVENT_TYPES.length).meta({ description: 'The event types this endpoint hears' }),
})

export const WebhookEndpointPath = z.object({ id: z.string().meta({ description: 'The endpoint id (a uuid)' }) })

export const WebhookEndpointCreated = z
  .object({
    id: z.uuid(),
    secret: z.string().meta({ description: 'The signing secret, `whsec_…`: shown this once, never again' }),
  })
  .meta({ id: 'WebhookEndpointCreated' })

export const WebhookSecretRotated = z
  .object({
    id: z.uuid(),
    secret: z.string().meta({ description: 'The new signing secret, `whsec_…`: shown this once' }),
    previousSecretExpiresAt: at.meta({ description: 'Until then deliveries carry a signature under the old secret too' }),
  })
  .meta({ id: 'WebhookSecretRotated' })

export const WebhookEndpointList = z
  .object({
    items: z.array(
      z.object({
        id: z.uuid(),
        url: z.string(),
        events: z.array(eventType),
        createdAt: at,
        disabledAt: at.nullable(),
        pendingDeliveries: z.int().min(0),
        deadLetteredDeliveries: z.int().min(0),
      }),
    ),
  })
  .meta({ id: 'WebhookEndpointList' })

export const WebhookDeliveryQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50).meta({ description: 'How many of the newest deliveries' }),
})

export const WebhookDeliveryList = z
  .object({
    items: z.array(
      z.object({
        webhookId: z.uuid().meta({ description: 'The `webhook-id` header: the event id, the same on every retry' }),
        eventType,
        occurredAt: at,
        state: z.enum(['pending', 'delivered', 'dead_lettered']),
        attempts: z.int().min(0),
        nextAttemptAt: at.nullable(),
        lastStatusCode: z.int().nullable(),
        lastFailure: z.string().nullable(),
        finishedAt: at.nullable(),
      }),
    ),
  })
  .meta({ id: 'WebhookDeliveryList' })

export const WebhookRedriven = z.object({ redriven: z.int().min(0) }).meta({ id: 'WebhookRedriven' })
