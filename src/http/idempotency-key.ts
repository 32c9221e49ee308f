import type { Request } from 'express'
import { IdempotencyKeyHeader } from './openapi/common.ts'
import { HttpProblemError } from './problem.ts'

/**
 * The Idempotency-Key of an idempotent operation (`idempotent: true` in its description): missing
 * or malformed, the request is `400 idempotency_key_required`, as draft-ietf-httpapi-idempotency-key-header
 * says for a key a documented operation requires (docs/api.md "Idempotency-Key").
 */
export function idempotencyKeyOf(req: Request): string {
  const key = IdempotencyKeyHeader.safeParse(req.get('idempotency-key'))
  if (!key.success)
    throw new HttpProblemError(400, 'idempotency_key_required', 'An Idempotency-Key header (1–200 printable characters) is required.')
  return key.data
}

/** The header that marks an answer as the stored first answer of an earlier request with the same key. */
export const replayedHeaders = (replayed: boolean): Record<string, string> => (replayed ? { 'Idempotent-Replayed': 'true' } : {})
