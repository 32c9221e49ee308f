import type { Knex } from 'knex'
import { RateLimitedError } from './errors.ts'

/**
 * Counts one event in a sliding window and refuses it past `limit`, in the caller's transaction.
 * An advisory lock on the bucket makes the count exact across any number of web processes.
 * `bucket` may be one bucket's keys under every CODE_HASH_KEYS key (current first): the hit is
 * written under the first and counted under all, so while an old key is listed the hits written
 * under it — by this process before the rotation, or by a process still on the old ring during a
 * rolling deploy — still count. (Re-keying the rows instead would race with those processes.)
 */
export async function hitRateLimitTx(
  trx: Knex.Transaction,
  bucket: Buffer | readonly Buffer[],
  limit: { max: number; windowSeconds: number },
  now: Date,
  code = 'rate_limited',
): Promise<void> {
  const buckets = Buffer.isBuffer(bucket) ? [bucket] : bucket
  const current = buckets[0]
  if (!current) throw new Error('a rate limit needs a bucket')
  // Every key of the bucket, in one order everywhere, so two rings cannot deadlock each other.
  for (const lock of [...new Set(buckets.map((key) => key.readBigInt64BE(0)))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [lock.toString()])
  }
  const windowStart = new Date(now.getTime() - limit.windowSeconds * 1000)
  // Expired hits of this bucket go as we pass: the table holds at most `max` rows per live bucket.
  await trx('platform.rate_limit_hits').whereIn('bucket_key', buckets).andWhere('hit_at', '<=', windowStart).delete()
  const hits = await trx('platform.rate_limit_hits').select('hit_at').whereIn('bucket_key', buckets).orderBy('hit_at', 'asc')
  if (hits.length >= limit.max) {
    const oldest = (hits[0] as { hit_at: Date }).hit_at
    throw new RateLimitedError((oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000, code)
  }
  await trx('platform.rate_limit_hits').insert({ bucket_key: current, hit_at: now })
}
