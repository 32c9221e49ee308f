import type { Fault, FaultAnswers } from '../faults.ts'

/** What Twilio answers in each case of the fault table (docs/delivery.md "Fault table"). */
export const FAULT_ANSWERS: FaultAnswers = {
  malformed: '400, code 21602 (no message body)',
  unauthorized: '401, code 20003 (a wrong auth token)',
  forbidden: '403, code 20003',
  not_found: '404, code 20404 (no such account: a wrong `TWILIO_ACCOUNT_SID`)',
  too_large: '413, no body',
  throttled: '429, code 20429 (400, code 21611, a sender queue past 10 hours, is the same row)',
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

/**
 * Twilio REST error codes about the recipient (its error dictionary): 21211 invalid `To`, 21408
 * the `To` number's region is not enabled for this account, 21610 the recipient replied STOP,
 * 21612 `To` cannot be reached from this sender, 21614 `To` is not a mobile number. Sending the
 * same message again can never succeed.
 */
// 21606 ("not a valid message-capable phone number for this destination") is the sender's, but per
// destination: were it ours for the whole provider, one person's number could hold SMS down for all.
const RECIPIENT_CODES = new Set([21211, 21408, 21606, 21610, 21612, 21614])

/**
 * Codes that say Twilio refused *us*: 20003 authentication failed, 20404 no such account (a wrong
 * TWILIO_ACCOUNT_SID), 21212 a `From` that is not a valid number at all.
 */
const OUR_CODES = new Set([20003, 20404, 21212])

/**
 * Codes that say our sender is sending faster than it can: 20429 too many requests, 21611 the
 * `From` number's queue holds more than Twilio keeps (10 hours of its rate), which a flood of
 * sign-ups to strangers' numbers leaves behind. Later, the same message goes.
 */
const THROTTLE_CODES = new Set([20429, 21611])

/** Maps a Twilio answer (HTTP status and the error body's `code`) to its row of the fault table; null for a success status. */
export function classifyTwilioAnswer(status: number, code: number | null): Fault | null {
  if (status >= 200 && status < 300) return null
  if (status === 429 || (code !== null && THROTTLE_CODES.has(code))) return 'throttled'
  if (status === 401 || status === 403 || status === 404 || (code !== null && OUR_CODES.has(code))) return 'provider_misconfigured'
  if (code !== null && RECIPIENT_CODES.has(code)) return 'recipient_refused'
  // A gateway that timed out may have passed the request on: ambiguous, as a timeout after writing is.
  if (status === 408 || status === 504) return 'indeterminate'
  if (status >= 500) return 'unavailable'
  // Any other 4xx is about this request (Twilio's 400 carries the reason in `code`): retrying it cannot help.
  if (status >= 400) return 'request_refused'
  return 'indeterminate'
}
