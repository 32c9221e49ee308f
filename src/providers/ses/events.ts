import type { ProviderEvent } from '../../outbox/delivery-events-sql.ts'
import { date, text } from '../provider-events.ts'

/**
 * The addresses an SES bounce or complaint names (`[{emailAddress}]`): each as written, or the
 * part inside `<…>` when SES passes on a display form; at most 50 (SES sends one per recipient).
 */
const recipientsOf = (list: unknown): string[] =>
  (Array.isArray(list) ? list.slice(0, 50) : []).flatMap((recipient) => {
    const address = text((recipient as { emailAddress?: unknown } | null)?.emailAddress, 320)
    if (!address) return []
    return [/<([^<>]+)>\s*$/.exec(address)?.[1] ?? address]
  })

/**
 * An SES event (event publishing's `eventType`, or the older identity notifications'
 * `notificationType`) as one of ours; null for the kinds we do not record (Send, Open, Click,
 * Rendering Failure, Subscription) and for anything unreadable. Pure, table-tested.
 */
export function sesEventFrom(message: unknown, fallbackTime: Date): ProviderEvent | null {
  const record = (message ?? {}) as Record<string, Record<string, unknown> | undefined> & {
    eventType?: unknown
    notificationType?: unknown
  }
  const kind = record.eventType ?? record.notificationType
  const providerMessageId = text(record.mail?.messageId, 200)
  if (!providerMessageId || typeof kind !== 'string') return null
  const at = (section: Record<string, unknown> | undefined) => date(section?.timestamp, record.mail?.timestamp) ?? fallbackTime
  switch (kind) {
    case 'Delivery':
      return { providerMessageId, event: 'delivered', subtype: null, occurredAt: at(record.delivery), suppress: null, recipients: [] }
    case 'Bounce': {
      const bounceType = text(record.bounce?.bounceType, 40)
      const subtype = [bounceType, text(record.bounce?.bounceSubType, 59)].filter(Boolean).join('/') || null
      return {
        providerMessageId,
        event: 'bounced',
        subtype,
        occurredAt: at(record.bounce),
        suppress: bounceType === 'Permanent' ? 'permanent_bounce' : null,
        recipients: recipientsOf(record.bounce?.bouncedRecipients),
      }
    }
    case 'Complaint':
      return {
        providerMessageId,
        event: 'complained',
        subtype: text(record.complaint?.complaintFeedbackType),
        occurredAt: at(record.complaint),
        suppress: 'complaint',
        recipients: recipientsOf(record.complaint?.complainedRecipients),
      }
    case 'Reject':
      return {
        providerMessageId,
        event: 'rejected',
        subtype: text(record.reject?.reason),
        occurredAt: at(record.reject),
        suppress: null,
        recipients: [],
      }
    case 'DeliveryDelay':
      return {
        providerMessageId,
        event: 'delayed',
        subtype: text(record.deliveryDelay?.delayType),
        occurredAt: at(record.deliveryDelay),
        suppress: null,
        recipients: [],
      }
    default:
      return null
  }
}
