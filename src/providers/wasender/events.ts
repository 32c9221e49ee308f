import type { DeliveryEvent } from '../../outbox/constants.ts'
import type { ProviderEvent } from '../../outbox/delivery-events-sql.ts'
import { date } from '../provider-events.ts'

// Wasender's message status codes (its "Webhook: Message Status Update" page): 0 ERROR, 1 PENDING,
// 2 SENT, 3 DELIVERED, 4 READ, 5 PLAYED. Pending and sent say nothing new after "published".
const WASENDER_STATUSES: Record<number, { event: DeliveryEvent; subtype: string | null } | undefined> = {
  0: { event: 'rejected', subtype: 'error' },
  3: { event: 'delivered', subtype: null },
  4: { event: 'delivered', subtype: 'read' },
  5: { event: 'delivered', subtype: 'played' },
}

/**
 * The events of a Wasender `messages.update` webhook (`data` is one update or a list of them:
 * `{key: {id}, update: {status}}`); other webhook events, and statuses we do not record, give none.
 */
export function wasenderEventsFrom(body: unknown, fallbackTime: Date): ProviderEvent[] {
  const record = (body ?? {}) as { event?: unknown; data?: unknown; timestamp?: unknown }
  if (record.event !== 'messages.update') return []
  const updates = Array.isArray(record.data) ? record.data : [record.data]
  const occurredAt = date(record.timestamp) ?? fallbackTime
  return updates.flatMap((update): ProviderEvent[] => {
    const { key, update: change } = (update ?? {}) as { key?: { id?: unknown }; update?: { status?: unknown } }
    const id = typeof key?.id === 'string' || typeof key?.id === 'number' ? String(key.id).slice(0, 200) : null
    const mapped = typeof change?.status === 'number' ? WASENDER_STATUSES[change.status] : undefined
    if (!id || !mapped) return []
    return [{ providerMessageId: id, ...mapped, occurredAt, suppress: null, recipients: [] }]
  })
}
