import type { Fault, FaultAnswers } from '../faults.ts'

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

// Meta's Cloud API error codes (its "Error codes" page), grouped by the row of the fault table they are.
/** The recipient cannot get this message on WhatsApp (no WhatsApp, an old client, terms not accepted): try the next phone channel. */
const UNREACHABLE = new Set([131026, 131047])
/** Whether a Cloud API error code (a send's answer or a failed status) says this number cannot get WhatsApp. */
export const isChannelUnreachableCode = (code: number): boolean => UNREACHABLE.has(code)
/** This recipient refuses us for good: 131050 stopped messages from us, 131021 the sender itself, 131030 not on a test account's list. */
const RECIPIENT_REFUSED = new Set([131021, 131030, 131050])
/** Too many messages to this one recipient in a short time (the pair rate limit): about the person, not the account. */
const RECIPIENT_THROTTLED = new Set([131056])
/** Throughput and rate limits: the app's, the account's, the phone number's (131048, 130429). */
const THROTTLING = new Set([4, 613, 80007, 130429, 131048])
/**
 * Meta refused *us*: an invalid or expired token, missing permissions, a template that does not
 * exist, is paused or takes other parameters, a locked, unpaid or unregistered sender, or one whose
 * display name is not approved yet (131037). No retry
 * can help until someone fixes the account.
 */
const MISCONFIGURED = new Set([0, 3, 10, 190, 368, 131031, 131037, 131042, 132000, 132001, 132005, 132007, 132012, 132015, 132016, 133010])
/** Meta's own trouble: "something went wrong", the API unknown/service errors, "service unavailable". */
const META_TROUBLE = new Set([1, 2, 131000, 131016])
/** Graph's subcode for an object id it does not know (`POST /{phone-number-id}/messages` with a wrong WHATSAPP_CLOUD_PHONE_NUMBER_ID). */
const UNKNOWN_OBJECT = 33

/** The Graph error of a failed answer (`error.code`, `error.error_subcode`), as far as it is numbers. */
export type GraphError = { code?: number; subcode?: number }

/** The code alone decides where Meta documents it (its advice: build on codes, not statuses). */
function faultOfCode({ code, subcode }: GraphError): Fault | null {
  if (code === undefined) return null
  if (UNREACHABLE.has(code)) return 'recipient_unreachable'
  if (RECIPIENT_REFUSED.has(code)) return 'recipient_refused'
  if (RECIPIENT_THROTTLED.has(code)) return 'recipient_throttled'
  if (THROTTLING.has(code)) return 'throttled'
  if (MISCONFIGURED.has(code) || (code >= 200 && code <= 299) || (code === 100 && subcode === UNKNOWN_OBJECT))
    return 'provider_misconfigured'
  if (META_TROUBLE.has(code)) return 'unavailable'
  return null
}

/** Maps a Graph API answer (HTTP status and its error) to its row of the fault table; null for a success status. */
export function classifyCloudApiAnswer(status: number, error: GraphError): Fault | null {
  if (status >= 200 && status < 300) return null
  const byCode = faultOfCode(error)
  if (byCode) return byCode
  if (status === 429) return 'throttled'
  if (status === 401 || status === 403 || status === 404) return 'provider_misconfigured'
  if (status === 408 || status === 504) return 'indeterminate'
  if (status >= 500) return 'unavailable'
  // Any other 4xx (code 100, an invalid parameter; 413): this request, as it is, will never go.
  if (status >= 400) return 'request_refused'
  return 'indeterminate'
}
