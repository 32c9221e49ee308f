import type { Knex } from 'knex'
import { RateLimitedError } from './errors.ts'

export type Limit = { max: number; windowSeconds: number }

/**
 * One bucket's keys: a single HMAC, or the same bucket under every CODE_HASH_KEYS key (current
 * first). Hits are written under the first and counted under all, so while an old key is listed
 * the hits written under it — before the rotation, or by a process still on the old ring during a
 * rolling deploy — still count (re-keying the rows instead would race with those processes).
 */
export type Bucket = Buffer | readonly Buffer[]

const HITS = 'platform.rate_limit_hits'
const keysOf = (bucket: Bucket): readonly Buffer[] => (Buffer.isBuffer(bucket) ? [bucket] : bucket)

/**
 * Locks the bucket (advisory locks on every key, in one order everywhere, make counts exact across
 * any number of web processes and two rings cannot deadlock each other), drops its hits that left
 * the window, and returns the seconds until the window has room again, or undefined while it has
 * room now. Reads at most `max` rows whatever the bucket holds.
 */
async function exhaustedForTx(trx: Knex.Transaction, bucket: Bucket, limit: Limit, now: Date): Promise<number | undefined> {
  const keys = keysOf(bucket)
  for (const lock of [...new Set(keys.map((key) => key.readBigInt64BE(0)))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [lock.toString()])
  }
  const windowStart = new Date(now.getTime() - limit.windowSeconds * 1000)
  // Expired hits of this bucket go as we pass: the table holds at most `max` rows per live bucket.
  await trx(HITS).whereIn('bucket_key', keys).andWhere('hit_at', '<=', windowStart).delete()
  const hits = await trx(HITS).select('hit_at').whereIn('bucket_key', keys).orderBy('hit_at', 'asc').limit(limit.max)
  if (hits.length < limit.max) return undefined
  const oldest = (hits[0] as { hit_at: Date }).hit_at
  return (oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000
}

async function insertHitTx(trx: Knex.Transaction, bucket: Bucket, now: Date): Promise<void> {
  const current = keysOf(bucket)[0]
  if (!current) throw new Error('a rate limit needs a bucket')
  await trx(HITS).insert({ bucket_key: current, hit_at: now })
}

/** Counts one event in a sliding window and refuses it past `limit`, in the caller's transaction. */
export async function hitRateLimitTx(trx: Knex.Transaction, bucket: Bucket, limit: Limit, now: Date, code = 'rate_limited'): Promise<void> {
  const retryAfterSeconds = await exhaustedForTx(trx, bucket, limit, now)
  if (retryAfterSeconds !== undefined) throw new RateLimitedError(retryAfterSeconds, code)
  await insertHitTx(trx, bucket, now)
}

/**
 * A budget spent only by failures (wrong codes): `checkTx` locks the bucket and says whether any is
 * left (undefined) or how long until one is, without spending; `spendTx`, after it in the same
 * transaction, counts one failure.
 */
export const budget = {
  checkTx: exhaustedForTx,
  spendTx: insertHitTx,
}
