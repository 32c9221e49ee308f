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
 * Locks the bucket: advisory locks on every key, taken in one order everywhere (ascending, in one
 * statement), make counts exact across any number of web processes and two rings cannot deadlock
 * each other. A statement of its own: the count that follows must take its snapshot after the
 * lock is held (under READ COMMITTED a statement's snapshot is taken when it starts).
 */
async function lockBucketTx(trx: Knex.Transaction, keys: readonly Buffer[]): Promise<void> {
  const locks = [...new Set(keys.map((key) => key.readBigInt64BE(0).toString()))]
  if (locks.length === 1) await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', locks)
  else await trx.raw('SELECT pg_advisory_xact_lock(k) FROM (SELECT k FROM unnest(?::bigint[]) AS k ORDER BY k) AS ordered', [locks])
}

const inList = (keys: readonly Buffer[]) => keys.map(() => '?').join(', ')

/**
 * After the lock, one statement: drops the bucket's hits that left the window (the table holds
 * at most `max` rows per live bucket), reads at most `max` of those still in it, and, with
 * `spend`, counts one more hit under the current key when there is room. Returns the seconds
 * until the window has room again, or undefined while it had room (and the hit was counted).
 */
async function windowTx(trx: Knex.Transaction, bucket: Bucket, limit: Limit, now: Date, spend: boolean): Promise<number | undefined> {
  const keys = keysOf(bucket)
  const current = keys[0]
  if (!current) throw new Error('a rate limit needs a bucket')
  await lockBucketTx(trx, keys)
  const windowStart = new Date(now.getTime() - limit.windowSeconds * 1000)
  // Sub-statements share one snapshot: `live` does not see `expired`'s deletes, hence its own bound.
  const { rows } = await trx.raw<{ rows: { live: number; oldest: Date | null }[] }>(
    `WITH expired AS (DELETE FROM ${HITS} WHERE bucket_key IN (${inList(keys)}) AND hit_at <= ?),
          live AS (SELECT hit_at FROM ${HITS} WHERE bucket_key IN (${inList(keys)}) AND hit_at > ? ORDER BY hit_at LIMIT ?)${
            spend
              ? `,
          spent AS (INSERT INTO ${HITS} (bucket_key, hit_at) SELECT ?, ? WHERE (SELECT count(*) FROM live) < ?)`
              : ''
          }
     SELECT count(*)::int AS live, min(hit_at) AS oldest FROM live`,
    [...keys, windowStart, ...keys, windowStart, limit.max, ...(spend ? [current, now, limit.max] : [])],
  )
  const { live, oldest } = rows[0]!
  if (live < limit.max || !oldest) return undefined
  return (oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000
}

/** Locks the bucket, drops its expired hits and says how long until it has room (undefined: room now). */
async function exhaustedForTx(trx: Knex.Transaction, bucket: Bucket, limit: Limit, now: Date): Promise<number | undefined> {
  return await windowTx(trx, bucket, limit, now, false)
}

async function insertHitTx(trx: Knex.Transaction, bucket: Bucket, now: Date): Promise<void> {
  const current = keysOf(bucket)[0]
  if (!current) throw new Error('a rate limit needs a bucket')
  await trx(HITS).insert({ bucket_key: current, hit_at: now })
}

/**
 * Counts one event in a sliding window and refuses it past `limit`, in the caller's transaction:
 * two round trips (the lock, then expire + count + hit in one statement).
 */
export async function hitRateLimitTx(trx: Knex.Transaction, bucket: Bucket, limit: Limit, now: Date, code = 'rate_limited'): Promise<void> {
  const retryAfterSeconds = await windowTx(trx, bucket, limit, now, true)
  if (retryAfterSeconds !== undefined) throw new RateLimitedError(retryAfterSeconds, code)
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
