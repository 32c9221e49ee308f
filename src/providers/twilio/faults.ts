import type { FaultAnswers } from '../faults.ts'

/** What Twilio answers in each case of the fault table (docs/delivery.md "Fault table"). */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '400, code 21602 (no message body)',
  unauthorized: '401, code 20003 (a wrong auth token)',
  forbidden: '403, code 20003',
  not_found: '404, code 20404 (no such account: a wrong `TWILIO_ACCOUNT_SID`)',
  too_large: '413, no body',
  throttled: '429, code 20429',
  throttled_seconds: '429, code 20429, `Retry-After: 30`',
  throttled_date: '429, code 20429, `Retry-After: <HTTP date>`',
  server_error: '500, no body',
  bad_gateway: '502, no body',
  unavailable: '503, no body',
  gateway_timeout: '504, no body',
  refused: 'nothing listens at `TWILIO_API_URL`',
  timeout_before: 'a TLS handshake that never completes',
  timeout_after: 'Twilio took the message, the answer never comes',
  reset: 'the socket closes once the request is read',
  recipient_refused: '400, code 21211 (an invalid `To`; 21610, a number that texted STOP, is the same row)',
  not_on_channel: undefined,
  unreadable_success: '201 with an HTML page',
}
