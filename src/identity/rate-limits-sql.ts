import type { Knex } from 'knex'

const HITS = 'platform.rate_limit_hits'

/**
 * One call of `platform.rate_limit_window` on a bucket's keys (current first): the seconds until the
 * window has room again, or undefined while it had room (and, with `spend`, the hit was counted).
 */
export async function rateLimitWindow(
  trx: Knex | Knex.Transaction,
  keys: readonly Buffer[],
  limit: { max: number; windowSeconds: number },
  now: Date,
  spend: boolean,
): Promise<number | undefined> {
  const { rows } = await trx.raw<{ rows: { wait: number | null }[] }>('SELECT platform.rate_limit_window(?::bytea[], ?, ?, ?, ?) AS wait', [
    keys as Buffer[],
    limit.max,
    limit.windowSeconds,
    now,
    spend,
  ])
  return rows[0]?.wait ?? undefined
}

export async function insertRateLimitHitTx(trx: Knex.Transaction, key: Buffer, now: Date): Promise<void> {
  await trx(HITS).insert({ bucket_key: key, hit_at: now })
}

export async function deleteRateLimitHitsTx(trx: Knex.Transaction, keys: readonly Buffer[]): Promise<void> {
  await trx(HITS)
    .whereIn('bucket_key', keys as Buffer[])
    .delete()
}

/** A budget's tiers as the SQL functions read them: each tier's keys (current first, hex), its max and window. */
export type TiersJson = { buckets: string[]; max: number; window_seconds: number }[]

/** `platform.budget_tiers_wait` (migration 20261206007000): locks every tier; the longest wait of those without room, or undefined. */
export async function budgetTiersWait(trx: Knex | Knex.Transaction, tiers: TiersJson, now: Date): Promise<number | undefined> {
  const { rows } = await trx.raw<{ rows: { wait: number | null }[] }>('SELECT platform.budget_tiers_wait(?::jsonb, ?) AS wait', [
    JSON.stringify(tiers),
    now,
  ])
  return rows[0]?.wait ?? undefined
}

/** `platform.spend_budget_tiers`: one hit in every tier when all have room (undefined), else nothing and the longest wait. */
export async function spendBudgetTiersTx(trx: Knex.Transaction, tiers: TiersJson, now: Date): Promise<number | undefined> {
  const { rows } = await trx.raw<{ rows: { wait: number | null }[] }>('SELECT platform.spend_budget_tiers(?::jsonb, ?) AS wait', [
    JSON.stringify(tiers),
    now,
  ])
  return rows[0]?.wait ?? undefined
}
