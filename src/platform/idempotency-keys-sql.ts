import type { Knex } from 'knex'

const IDEMPOTENCY_KEYS = 'platform.idempotency_keys'

/** One staff member's key for one kind of request. */
export type IdempotencyKey = { identityId: string; scope: string; key: string }

const keyRowTx = (trx: Knex.Transaction, key: IdempotencyKey) =>
  trx(IDEMPOTENCY_KEYS).where({ identity_id: key.identityId, scope: key.scope, key: key.key })

/** Claims a key for a request (by its hash); false when the key is already taken. */
export async function claimIdempotencyKeyTx(trx: Knex.Transaction, key: IdempotencyKey, requestHash: Buffer, now: Date): Promise<boolean> {
  const claimed = await trx(IDEMPOTENCY_KEYS)
    .insert({ identity_id: key.identityId, scope: key.scope, key: key.key, request_hash: requestHash, created_at: now })
    .onConflict(['identity_id', 'scope', 'key'])
    .ignore()
    .returning('key')
  return claimed.length > 0
}

/** A taken key, locked for this transaction: the request it was taken for and its first answer (null while unfinished). */
export async function lockIdempotencyKeyTx<R>(
  trx: Knex.Transaction,
  key: IdempotencyKey,
): Promise<{ request_hash: Buffer; response: R | null }> {
  return await keyRowTx(trx, key).forUpdate().first<{ request_hash: Buffer; response: R | null }>('request_hash', 'response')
}

/** Remembers the first answer of the request a key was claimed for. */
export async function storeIdempotentResponseTx(trx: Knex.Transaction, key: IdempotencyKey, response: unknown): Promise<void> {
  await keyRowTx(trx, key).update({ response: response as object })
}
