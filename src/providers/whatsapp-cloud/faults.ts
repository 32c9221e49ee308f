import type { FaultAnswers } from '../faults.ts'

/** What Meta's Cloud API answers in each case of the fault table (docs/delivery.md "Fault table"). */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '400, code 100 (invalid parameter)',
  unauthorized: '401, code 190 (an invalid or expired access token)',
  forbidden: '403, code 10 (permission denied)',
  not_found: '400, code 100 subcode 33 (no such phone number id)',
  too_large: '413, no Graph error',
  throttled: '429, code 130429 (throughput)',
  throttled_seconds: '429, code 130429, `Retry-After: 30`',
  throttled_date: '429, code 130429, `Retry-After: <HTTP date>`',
  server_error: '500, code 131000 (something went wrong)',
  bad_gateway: '502, no Graph error',
  unavailable: '503, no Graph error',
  gateway_timeout: '504, no Graph error',
  refused: 'nothing listens at `WHATSAPP_CLOUD_API_URL`',
  timeout_before: 'a TLS handshake that never completes',
  timeout_after: 'Meta took the message, the answer never comes',
  reset: 'the socket closes once the request is read',
  recipient_refused: '400, code 131050 (the person stopped messages from us)',
  not_on_channel: '400, code 131026 (the number has no WhatsApp)',
  unreadable_success: '200 with an HTML page',
}
