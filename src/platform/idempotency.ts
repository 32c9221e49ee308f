import { createHash } from 'node:crypto'
import type { Knex } from 'knex'
import { ConflictError, UnprocessableError } from '../identity/errors.ts'
import { claimIdempotencyKeyTx, lockIdempotencyKeyTx, storeIdempotentResponseTx, type IdempotencyKey } from './idempotency-keys-sql.ts'

/**
 * The key was taken by another request (another body, another dead letter): 422, as
 * draft-ietf-httpapi-idempotency-key-header says; the client must change the request or the key,
 * since retrying it as it is can never succeed (docs/api.md "Idempotency-Key").
 */
export class IdempotencyKeyReusedError extends UnprocessableError {
  constructor() {
    super('idempotency_key_reused', 'This Idempotency-Key was used for a different request.')
  }
}

/** A request under the key has not finished: 409, the one answer the draft lets a client retry unchanged. */
export class IdempotencyKeyInUseError extends ConflictError {
  constructor() {
    super('idempotency_key_in_use', 'A request with this Idempotency-Key did not finish; try again, or use a new key.')
  }
}

/** What an Idempotency-Key found: this request claimed it, or an earlier one with the same request left its answer. */
export type KeyClaim<T> = { claimed: true } | { claimed: false; response: T }

/** How a request without a secret in it is remembered: the SHA-256 of its description (the courier's is an HMAC). */
export const requestDigest = (request: string): Buffer => createHash('sha256').update(request).digest()

/**
 * The one idempotency rule of every route that takes an Idempotency-Key (docs/api.md
 * "Idempotency-Key"): claims the caller's key for one request in the caller's transaction, or finds
 * the first answer an earlier request with the same key and the same request left. Another request
 * under the key is `IdempotencyKeyReusedError`, one that did not finish `IdempotencyKeyInUseError`.
 * `remember` stores the answer in the same transaction; a refusal the route wants replayed commits
 * with it.
 */
export async function useIdempotencyKeyTx<T>(
  trx: Knex.Transaction,
  key: IdempotencyKey,
  requestHash: Buffer,
  now: Date,
): Promise<{ claim: KeyClaim<T>; remember: (response: T) => Promise<void> }> {
  const remember = (response: T) => storeIdempotentResponseTx(trx, key, response)
  if (await claimIdempotencyKeyTx(trx, key, requestHash, now)) return { claim: { claimed: true }, remember }
  const stored = await lockIdempotencyKeyTx<T>(trx, key)
  if (!stored.request_hash.equals(requestHash)) throw new IdempotencyKeyReusedError()
  if (!stored.response) throw new IdempotencyKeyInUseError()
  return { claim: { claimed: false, response: stored.response }, remember }
}
