import type { DeliveryEvent } from '../outbox/constants.ts'
import type { ProviderEvent } from '../outbox/delivery-events-sql.ts'

const text = (value: unknown, max = 100): string | null => (typeof value === 'string' && value.length > 0 ? value.slice(0, max) : null)
const date = (...candidates: unknown[]): Date | undefined => {
  for (const candidate of candidates) {
    if (typeof candidate !== 'string' && typeof candidate !== 'number') continue
    // Wasender sends milliseconds on some events and seconds on others.
    const parsed = new Date(typeof candidate === 'number' && candidate < 1e12 ? candidate * 1000 : candidate)
    if (!Number.isNaN(parsed.getTime())) return parsed
  }
  return undefined
}

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

/** One WhatsApp Cloud API status as ours, and whether it says the number cannot get WhatsApp (the fallback's cue). */
export type CloudApiStatusEvent = { event: ProviderEvent; unreachable: boolean }

/**
 * The statuses of a Cloud API `messages` webhook (`entry[].changes[].value.statuses[]`, each
 * `{id, status, timestamp, errors?: [{code}]}`): `delivered`, `read` (a delivery too) and `failed`
 * (rejected, its subtype Meta's code); `sent` says nothing new after "published". Never a
 * suppression: a number without WhatsApp may still take an SMS.
 */
export function whatsAppCloudStatusesFrom(
  body: unknown,
  fallbackTime: Date,
  isUnreachable: (code: number) => boolean,
): CloudApiStatusEvent[] {
  const entries = (body as { entry?: unknown } | null)?.entry
  const changes = (Array.isArray(entries) ? entries.slice(0, 50) : []).flatMap((entry) => {
    const list = (entry as { changes?: unknown } | null)?.changes
    return Array.isArray(list) ? list.slice(0, 50) : []
  })
  const statuses = changes.flatMap((change) => {
    const { field, value } = (change ?? {}) as { field?: unknown; value?: { statuses?: unknown } }
    return field === 'messages' && Array.isArray(value?.statuses) ? value.statuses.slice(0, 100) : []
  })
  return statuses.flatMap((status): CloudApiStatusEvent[] => {
    const record = (status ?? {}) as { id?: unknown; status?: unknown; timestamp?: unknown; errors?: unknown }
    const providerMessageId = text(record.id, 200)
    if (!providerMessageId) return []
    const seconds = typeof record.timestamp === 'string' && /^\d{1,12}$/.test(record.timestamp) ? Number(record.timestamp) : undefined
    const occurredAt = date(seconds) ?? fallbackTime
    const base = { providerMessageId, occurredAt, suppress: null, recipients: [] }
    if (record.status === 'delivered') return [{ event: { ...base, event: 'delivered', subtype: null }, unreachable: false }]
    if (record.status === 'read') return [{ event: { ...base, event: 'delivered', subtype: 'read' }, unreachable: false }]
    if (record.status !== 'failed') return []
    const code = Array.isArray(record.errors) ? (record.errors[0] as { code?: unknown } | null)?.code : undefined
    const known = typeof code === 'number' && Number.isInteger(code)
    return [
      {
        event: { ...base, event: 'rejected', subtype: known ? `WA${code}` : 'error' },
        unreachable: known && isUnreachable(code),
      },
    ]
  })
}

// Twilio's error codes that prove the number itself cannot receive SMS (its error dictionary):
// 30005 unknown destination handset (no such number, or no longer in service), 30006 a landline
// or a carrier that cannot take SMS. 30003 (switched off), 30004 (blocked by the recipient),
// 30007 (filtered) and 30008 (unknown) say nothing lasting about the number: never suppressed.
const TWILIO_UNREACHABLE_NUMBER = new Set(['30005', '30006'])

/**
 * The event of a Twilio message status callback (form parameters `MessageSid`, `MessageStatus`,
 * `ErrorCode`, `To`): `delivered`, `undelivered` (the carrier could not deliver: bounced) and
 * `failed` (never sent: rejected) with the error code in the subtype; other statuses (queued,
 * sent, …) say nothing new after "published" and give none. Twilio's callback has no time.
 */
export function twilioEventFrom(params: ReadonlyMap<string, string>): ProviderEvent | null {
  const sid = params.get('MessageSid') ?? params.get('SmsSid')
  if (!sid || !/^(SM|MM)[0-9a-fA-F]{32}$/.test(sid)) return null
  const status = params.get('MessageStatus') ?? params.get('SmsStatus')
  const code = /^\d{1,6}$/.test(params.get('ErrorCode') ?? '') ? params.get('ErrorCode')! : null
  const to = text(params.get('To'), 32)
  const failed = { undelivered: 'bounced', failed: 'rejected' } as const
  if (status === 'delivered')
    return { providerMessageId: sid, event: 'delivered', subtype: null, occurredAt: null, suppress: null, recipients: [] }
  if (status !== 'undelivered' && status !== 'failed') return null
  return {
    providerMessageId: sid,
    event: failed[status],
    subtype: code ? `${status}/${code}` : status,
    occurredAt: null,
    suppress: code && TWILIO_UNREACHABLE_NUMBER.has(code) ? 'permanent_bounce' : null,
    recipients: to ? [to] : [],
  }
}
