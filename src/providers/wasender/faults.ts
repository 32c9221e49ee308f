import type { FaultAnswers } from '../faults.ts'

/** What Wasender answers in each case of the fault table (docs/delivery.md "Fault table"). */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '400 `{success: false}`',
  unauthorized: '401 (an unknown API key)',
  forbidden: '403',
  not_found: '404 (the route or session is unknown)',
  too_large: '413',
  throttled: '429',
  throttled_seconds: '429, `Retry-After: 30`',
  throttled_date: '429, `Retry-After: <HTTP date>`',
  server_error: '500',
  bad_gateway: '502',
  unavailable: '503',
  gateway_timeout: '504',
  refused: 'nothing listens at `WASENDER_API_URL`',
  timeout_before: 'a TLS handshake that never completes',
  timeout_after: 'Wasender took the message, the answer never comes',
  reset: 'the socket closes once the request is read',
  recipient_refused: '422 `Validation failed` on `to` alone',
  not_on_channel: undefined,
  unreadable_success: '200 with an HTML page',
}
