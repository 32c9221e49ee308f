import { z } from 'zod'

/** Headers that several operations share, described once. */
export const RetryAfterHeader = z.string().regex(/^\d+$/).meta({ description: 'Seconds to wait before trying again.', example: '30' })
export const IdempotencyKeyHeader = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
  .meta({
    description:
      'Any 1–200 printable characters chosen by the caller; a repeat of the same key answers the first result without doing the work again.',
    example: '0b8e1c4e-5d0c-4a41-9f55-cc1d1b2f6a10',
  })
export const IdempotentReplayedHeader = z
  .literal('true')
  .meta({ description: 'Present when this answer is the stored result of an earlier request with the same Idempotency-Key.' })
export const DeviceCookieHeader = z
  .string()
  .regex(/^sealpost_device=[A-Za-z0-9_-]+;/)
  .meta({
    description:
      'The device cookie (`sealpost_device`, HttpOnly, SameSite=Strict, Secure outside development, 90 days): a client that sends it back on its next requests spends budgets of its own on this account — sign-in failures, codes to its addresses, wrong codes — which strangers cannot exhaust. It grants no access by itself.',
  })
/** A success answer that trusts the client: it carries the device cookie. */
export const DeviceCookieHeaders = z.object({ 'Set-Cookie': DeviceCookieHeader })
export const ElevationTokenHeader = z
  .string()
  .min(1)
  .meta({ description: 'The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session).' })

const Problem = z
  .object({
    type: z.string().meta({ description: '`https://sealpost.dev/problems/<code>`' }),
    title: z.string(),
    status: z.int(),
    code: z.string().meta({ description: 'Stable machine-readable reason' }),
    errors: z
      .array(z.object({ pointer: z.string(), detail: z.string() }))
      .optional()
      .meta({ description: 'For `invalid_request`: which fields are wrong' }),
    error: z
      .object({ http_code: z.int(), message: z.string() })
      .optional()
      .meta({ description: 'The /hooks/ routes: the same refusal in the shape Supabase Auth reads from a hook' }),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details' })

/** The problem body for one status, narrowed to the `code` values that status can carry on one operation. */
export function problemSchema(status: number, codes: readonly string[]) {
  return z.intersection(Problem, z.looseObject({ status: z.literal(status), code: z.enum(codes as [string, ...string[]]) }))
}

/** What Node's parser (src/http/client-error.ts), express.json and the problem mapping can answer on any route. */
export const EVERY_ROUTE_PROBLEMS = {
  400: ['malformed_json', 'malformed_encoding', 'malformed_path', 'bad_request'],
  413: ['payload_too_large'],
  415: ['bad_request'],
  431: ['headers_too_large'],
  503: ['service_unavailable'],
} as const satisfies Record<number, readonly string[]>

/**
 * What every idempotent operation can answer about its key, as draft-ietf-httpapi-idempotency-key-header
 * assigns the statuses (docs/api.md "Idempotency-Key"): none or a malformed one, another request
 * under it (retrying unchanged cannot succeed), and one still in progress (retry unchanged).
 */
export const IDEMPOTENCY_PROBLEMS = {
  400: ['idempotency_key_required'],
  409: ['idempotency_key_in_use'],
  422: ['idempotency_key_reused'],
} as const satisfies Record<number, readonly string[]>

/** Statuses whose answers carry Retry-After. */
export const RETRY_AFTER_STATUSES = new Set([429, 503])
