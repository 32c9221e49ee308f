import type { ProviderEvent } from '../../outbox/delivery-events-sql.ts'
import { text } from '../provider-events.ts'

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
