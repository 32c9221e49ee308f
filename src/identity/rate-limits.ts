import type { Knex } from 'knex'
import { RateLimitedError } from './errors.ts'
import {
  budgetTiersWait,
  deleteRateLimitHitsTx,
  insertRateLimitHitTx,
  rateLimitWindow,
  spendBudgetTiersTx,
  type TiersJson,
} from './rate-limits-sql.ts'

export type Limit = { max: number; windowSeconds: number }

/**
 * One bucket's keys: a single HMAC, or the same bucket under every CODE_HASH_KEYS key (current
 * first). Hits are written under the first and counted under all, so while an old key is listed
 * the hits written under it — before the rotation, or by a process still on the old ring during a
 * rolling deploy — still count (re-keying the rows instead would race with those processes).
 */
export type Bucket = Buffer | readonly Buffer[]

const keysOf = (bucket: Bucket): readonly Buffer[] => (Buffer.isBuffer(bucket) ? [bucket] : bucket)

/**
 * One call of `platform.rate_limit_window` (migration 20261201000800): locks the bucket (advisory
 * locks on every key, ascending, so counts are exact across any number of web processes and two
 * rings cannot deadlock each other), then, in a statement of its own (its snapshot taken after the
 * lock is held), drops the bucket's hits that left the window (the table holds at most `max` rows
 * per live bucket), counts those still in it (at most `max` per key), and, with `spend`, counts one more
 * hit under the current key when there is room. Returns the seconds until the window has room
 * again, or undefined while it had room (and the hit was counted).
 */
async function countInWindow(
  trx: Knex | Knex.Transaction,
  bucket: Bucket,
  limit: Limit,
  now: Date,
  spend: boolean,
): Promise<number | undefined> {
  const keys = keysOf(bucket)
  if (keys.length === 0) throw new Error('a rate limit needs a bucket')
  return await rateLimitWindow(trx, keys, limit, now, spend)
}

/** Locks the bucket, drops its expired hits and says how long until it has room (undefined: room now). */
async function exhaustedFor(trx: Knex | Knex.Transaction, bucket: Bucket, limit: Limit, now: Date): Promise<number | undefined> {
  return await countInWindow(trx, bucket, limit, now, false)
}

async function insertHitTx(trx: Knex.Transaction, bucket: Bucket, now: Date): Promise<void> {
  const current = keysOf(bucket)[0]
  if (!current) throw new Error('a rate limit needs a bucket')
  await insertRateLimitHitTx(trx, current, now)
}

/**
 * Counts one event in a sliding window and refuses it past `limit`: one round trip, in the
 * caller's transaction, or on its own (one statement is its own transaction, the locks held to
 * its end).
 */
export async function hitRateLimit(
  trx: Knex | Knex.Transaction,
  bucket: Bucket,
  limit: Limit,
  now: Date,
  code = 'rate_limited',
): Promise<void> {
  const retryAfterSeconds = await countInWindow(trx, bucket, limit, now, true)
  if (retryAfterSeconds !== undefined) throw new RateLimitedError(retryAfterSeconds, code)
}

/** Forgets every hit of a bucket (under every key of the ring): what was spent is spent no more. */
export async function clearBucketTx(trx: Knex.Transaction, bucket: Bucket): Promise<void> {
  await deleteRateLimitHitsTx(trx, keysOf(bucket))
}

/**
 * A budget spent only by failures (wrong codes): `check` locks the bucket and says whether any is
 * left (undefined) or how long until one is, without spending; `spendTx`, after it in the same
 * transaction, counts one failure.
 */
export const budget = {
  check: exhaustedFor,
  spendTx: insertHitTx,
}

/**
 * One budget seen from the owner's side as well as the attacker's: a client network's slice, a
 * ceiling every anonymous client shares, and, for a client that signed in as the budget's owner
 * before (a trusted device), a budget of the device's own. What a stranger spends is then the
 * stranger's: one network spends at most its slice, many spend at most the ceiling, and the owner's
 * own client spends neither (docs/security.md "Budgets from the owner's side").
 */
export type OwnerBudget = { perClient: Limit; ceiling: Limit; perDevice: Limit }

/** One sliding window of a budget: its bucket (under every key of the ring) and its limit. */
export type Tier = { bucket: Bucket; limit: Limit }

/**
 * A budget of several tiers follows one rule, in SQL (migration 20261206007000): a request fits
 * when every tier has room and then spends one hit in each; refused, it spends nothing and is told
 * the longest wait. `tiersWait` checks (locking every tier, in the order given: every caller names
 * them slice, then ceiling) without spending: undefined while all have room, else the longest wait.
 */
export async function tiersWait(trx: Knex | Knex.Transaction, tiers: readonly Tier[], now: Date): Promise<number | undefined> {
  return await budgetTiersWait(trx, tiersJson(tiers), now)
}

/** Spends one hit in every tier when all have room (undefined); else spends nothing and answers the longest wait. */
export async function spendTiersTx(trx: Knex.Transaction, tiers: readonly Tier[], now: Date): Promise<number | undefined> {
  return await spendBudgetTiersTx(trx, tiersJson(tiers), now)
}

/** The tiers as `platform.spend_budget_tiers` and `platform.budget_tiers_wait` read them. */
export function tiersJson(tiers: readonly Tier[]): TiersJson {
  return tiers.map((tier) => ({
    buckets: keysOf(tier.bucket).map((key) => key.toString('hex')),
    max: tier.limit.max,
    window_seconds: tier.limit.windowSeconds,
  }))
}
