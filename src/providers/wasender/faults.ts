import type { Fault, FaultAnswers } from '../faults.ts'

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

/** Whether a 422's `errors` (Wasender's validation failures, per field) name the recipient's number alone. */
function aboutRecipientOnly(body: unknown): boolean {
  const errors = (body as { errors?: unknown } | undefined)?.errors
  if (typeof errors !== 'object' || errors === null) return false
  const fields = Object.keys(errors)
  return fields.length === 1 && fields[0] === 'to'
}

/** Maps a Wasender HTTP answer to its row of the fault table; null for a success status. Pure, table-tested. */
export function classifyWasenderAnswer(status: number, body: unknown): Fault | null {
  if (status >= 200 && status < 300) return null
  if (status === 429) return 'throttled'
  // Our key, our plan or our URL: never the person's.
  if (status === 401 || status === 403 || status === 404) return 'provider_misconfigured'
  if (status === 422 && aboutRecipientOnly(body)) return 'recipient_refused'
  if (status === 408 || status === 504) return 'indeterminate'
  if (status >= 500) return 'unavailable'
  // Any other 4xx (400 malformed, 413, a 422 on the text): this request, as it is, will never go.
  if (status >= 400) return 'request_refused'
  return 'indeterminate'
}
