import type { Knex } from 'knex'
import { RateLimitedError } from './errors.ts'

export type Limit = { max: number; windowSeconds: number }

const HITS = 'platform.rate_limit_hits'

/**
 * Locks the bucket (an advisory lock makes counts exact across any number of web processes), drops
 * its hits that left the window, and returns the seconds until the window has room again, or
 * undefined while it has room now. Reads at most `max` rows whatever the bucket holds.
 */
async function exhaustedForTx(trx: Knex.Transaction, bucket: Buffer, limit: Limit, now: Date): Promise<number | undefined> {
  await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [bucket.readBigInt64BE(0).toString()])
  const windowStart = new Date(now.getTime() - limit.windowSeconds * 1000)
  // Expired hits of this bucket go as we pass: the table holds at most `max` rows per live bucket.
  await trx(HITS).where({ bucket_key: bucket }).andWhere('hit_at', '<=', windowStart).delete()
  const hits = await trx(HITS).select('hit_at').where({ bucket_key: bucket }).orderBy('hit_at', 'asc').limit(limit.max)
  if (hits.length < limit.max) return undefined
  const oldest = (hits[0] as { hit_at: Date }).hit_at
  return (oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000
}

/** Counts one event in a sliding window and refuses it past `limit`, in the caller's transaction. */
export async function hitRateLimitTx(trx: Knex.Transaction, bucket: Buffer, limit: Limit, now: Date, code = 'rate_limited'): Promise<void> {
  const retryAfterSeconds = await exhaustedForTx(trx, bucket, limit, now)
  if (retryAfterSeconds !== undefined) throw new RateLimitedError(retryAfterSeconds, code)
  await trx(HITS).insert({ bucket_key: bucket, hit_at: now })
}

/**
 * A budget spent only by failures (wrong codes): `checkTx` locks the bucket and says whether any is
 * left (undefined) or how long until one is, without spending; `spendTx`, after it in the same
 * transaction, counts one failure.
 */
export const budget = {
  checkTx: exhaustedForTx,
  async spendTx(trx: Knex.Transaction, bucket: Buffer, now: Date): Promise<void> {
    await trx(HITS).insert({ bucket_key: bucket, hit_at: now })
  },
}
