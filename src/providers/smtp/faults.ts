import type { FaultAnswers } from '../faults.ts'

/**
 * What an SMTP relay answers in each case of the fault table, as RFC 5321 and RFC 3463 word it
 * (docs/delivery.md "Fault table"). SMTP carries no Retry-After: its throttles keep no hint.
 */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '554 5.6.0 to the message (after the body)',
  unauthorized: '535 5.7.8 to AUTH (credentials refused)',
  forbidden: '530 5.7.0 to MAIL FROM (authentication required)',
  not_found: '550 5.1.8 to MAIL FROM (our sender is unknown to the relay)',
  too_large: '552 5.3.4 to the message',
  throttled: '421 4.7.0 greeting (try again later)',
  throttled_seconds: '452 4.5.3 to RCPT TO (no Retry-After in SMTP)',
  throttled_date: '452 4.5.3 to RCPT TO (no Retry-After in SMTP)',
  server_error: '451 4.3.0 to the message (local error in processing)',
  bad_gateway: '421 4.3.2 greeting (service not available)',
  unavailable: '450 4.3.2 to MAIL FROM (system not accepting messages)',
  gateway_timeout: 'no gateway in SMTP: the reply to the message is lost (as the reset)',
  refused: 'nothing listens at `SMTP_URL`',
  timeout_before: 'no greeting ever comes',
  timeout_after: 'the reply to the message never comes',
  reset: 'the connection drops after the message',
  recipient_refused: '550 5.1.1 to RCPT TO',
  not_on_channel: undefined,
  unreadable_success: 'a reply to the message that is no SMTP reply',
}
