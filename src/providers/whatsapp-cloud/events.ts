import type { ProviderEvent } from '../../outbox/delivery-events-sql.ts'
import { date, text } from '../provider-events.ts'

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
  // Every status: a signed body is Meta's, bounded by the route's 3 MB; one left out would be lost (Meta does not resend it).
  const changes = (Array.isArray(entries) ? entries : []).flatMap((entry) => {
    const list = (entry as { changes?: unknown } | null)?.changes
    return Array.isArray(list) ? list : []
  })
  const statuses = changes.flatMap((change) => {
    const { field, value } = (change ?? {}) as { field?: unknown; value?: { statuses?: unknown } }
    return field === 'messages' && Array.isArray(value?.statuses) ? value.statuses : []
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
