import type { Knex } from 'knex'
import { RateLimitedError } from './errors.ts'

/**
 * Counts one event in a sliding window and refuses it past `limit`, in the caller's transaction.
 * An advisory lock on the bucket makes the count exact across any number of web processes.
 */
export async function hitRateLimitTx(
  trx: Knex.Transaction,
  bucket: Buffer,
  limit: { max: number; windowSeconds: number },
  now: Date,
  code = 'rate_limited',
): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [bucket.readBigInt64BE(0).toString()])
  const windowStart = new Date(now.getTime() - limit.windowSeconds * 1000)
  // Expired hits of this bucket go as we pass: the table holds at most `max` rows per live bucket.
  await trx('platform.rate_limit_hits').where({ bucket_key: bucket }).andWhere('hit_at', '<=', windowStart).delete()
  const hits = await trx('platform.rate_limit_hits').select('hit_at').where({ bucket_key: bucket }).orderBy('hit_at', 'asc')
  if (hits.length >= limit.max) {
    const oldest = (hits[0] as { hit_at: Date }).hit_at
    throw new RateLimitedError((oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000, code)
  }
  await trx('platform.rate_limit_hits').insert({ bucket_key: bucket, hit_at: now })
}
