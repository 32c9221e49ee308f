import type { Knex } from 'knex'
import { afterAnswer, afterTransientFailures, type HealthPolicy, type ProviderHealth } from './provider-health.ts'
import { releaseHeldJobsTx } from './pgboss-jobs-sql.ts'
import type { Channel } from './constants.ts'
import { PHONE_CHANNELS } from './destination.ts'

const STATES = 'outbox.provider_states'

type Row = {
  provider: string
  channel: string
  state: ProviderHealth['state']
  failure_streak: number
  last_failure_at: Date | null
  down_since: Date | null
  probe_interval_ms: number | null
  next_probe_at: Date | null
  probe_until: Date | null
}

const healthOf = (row: Row): ProviderHealth => ({
  provider: row.provider,
  channel: row.channel,
  state: row.state,
  failureStreak: row.failure_streak,
  lastFailureAt: row.last_failure_at,
  downSince: row.down_since,
  probeIntervalMs: row.probe_interval_ms,
  nextProbeAt: row.next_probe_at,
  probeUntil: row.probe_until,
})

/** Every provider's state as the fleet holds it; a provider with no row has never failed (up). */
export async function providerStates(db: Knex | Knex.Transaction): Promise<Map<string, ProviderHealth>> {
  const rows: Row[] = await db(STATES).select('*').orderBy('provider')
  return new Map(rows.map((row) => [row.provider, healthOf(row)]))
}

/**
 * A worker's providers get their row (up) at startup if they have none, so the backlog view and
 * the gauge list every provider in use, not only those that have failed.
 */
export async function ensureProviderStates(db: Knex, providers: readonly { id: string; channel: Channel }[], now: Date): Promise<void> {
  if (providers.length === 0) return
  await db(STATES)
    .insert(providers.map((provider) => ({ provider: provider.id, channel: provider.channel, updated_at: now })))
    .onConflict('provider')
    .ignore()
}

/**
 * Takes the probe of a provider held down, for one send: only when its next probe is due and no
 * other probe holds the lease. The lease lapses by itself at `until`, so a prober that crashed
 * never keeps the hold shut. True when this caller won it.
 */
export async function takeProbeLease(db: Knex, provider: string, until: Date, now: Date): Promise<boolean> {
  const rows = await db(STATES)
    .where({ provider, state: 'down' })
    .andWhere('next_probe_at', '<=', now)
    .andWhereRaw('(probe_until IS NULL OR probe_until <= ?)', [now])
    .update({ probe_until: until, updated_at: now })
  return rows === 1
}

/**
 * Which of these providers are up, read under a share lock: a transaction lifting one of them is
 * waited for, so a deferral recorded beside it sees the lift.
 */
export async function providersUpTx(trx: Knex.Transaction, providers: readonly string[]): Promise<Set<string>> {
  if (providers.length === 0) return new Set()
  const rows: { provider: string; state: string }[] = await trx(STATES)
    .select('provider', 'state')
    .whereIn('provider', [...providers])
    .orderBy('provider')
    .forShare()
  const known = new Map(rows.map((row) => [row.provider, row.state]))
  return new Set(providers.filter((provider) => known.get(provider) !== 'down'))
}

/** What one record transaction heard from one provider. */
export type ProviderAnswers = {
  provider: string
  channel: Channel
  /** Answers that prove it is there: a success, or a REJECTED (the recipient's fault). */
  answered: number
  /** UNAVAILABLE / INDETERMINATE answers, and whether one of them was the probe's. */
  transient: number
  probe: boolean
  /** It refused us (FailureEffect `provider_misconfigured`): held down at once, whatever else it answered. */
  misconfigured?: boolean
}

export type ProviderTransition = {
  provider: string
  channel: Channel
  to: 'down' | 'up' | 'probe_failed'
  failureStreak: number
  nextProbeAt: Date | null
  /** `up`: the held messages called back at once. */
  released?: number
}

/**
 * The record step's part of the outage hold, in its transaction: answers that prove a provider is
 * there end its streak and lift its hold (calling its channel's held messages back at once, in
 * order of expiry); transient ones grow the streak, mark it down at the policy's threshold, or
 * push a failed probe's next one out. Rows are locked in provider order; a provider that is up
 * with no streak is not locked at all by answers (the common case: publications cost nothing here).
 */
export async function noteProviderAnswersTx(
  trx: Knex.Transaction,
  answers: readonly ProviderAnswers[],
  now: Date,
  policy: HealthPolicy,
): Promise<ProviderTransition[]> {
  const transitions: ProviderTransition[] = []
  for (const answer of [...answers].sort((a, b) => a.provider.localeCompare(b.provider))) {
    if (answer.answered === 0 && answer.transient === 0 && !answer.misconfigured) continue
    let current: Row | undefined
    if (answer.transient === 0 && !answer.misconfigured) {
      current = await trx(STATES)
        .where({ provider: answer.provider })
        .andWhereRaw("(state <> 'up' OR failure_streak > 0)")
        .forUpdate()
        .first<Row | undefined>()
      if (!current) continue
    } else {
      await trx.raw(`INSERT INTO ${STATES} (provider, channel, updated_at) VALUES (?, ?, ?) ON CONFLICT (provider) DO NOTHING`, [
        answer.provider,
        answer.channel,
        now,
      ])
      current = await trx(STATES).where({ provider: answer.provider }).forUpdate().first<Row>()
    }
    // A misconfiguration counts as a whole streak: no later send through it can succeed until someone fixes it.
    const change = answer.misconfigured
      ? afterTransientFailures(healthOf(current), { count: Math.max(policy.downAfter, answer.transient), probe: answer.probe }, now, policy)
      : answer.answered > 0
        ? afterAnswer(healthOf(current))
        : afterTransientFailures(healthOf(current), { count: answer.transient, probe: answer.probe }, now, policy)
    const next = change.health
    await trx(STATES).where({ provider: answer.provider }).update({
      state: next.state,
      failure_streak: next.failureStreak,
      last_failure_at: next.lastFailureAt,
      down_since: next.downSince,
      probe_interval_ms: next.probeIntervalMs,
      next_probe_at: next.nextProbeAt,
      probe_until: next.probeUntil,
      updated_at: now,
    })
    if (!change.transition) continue
    const transition: ProviderTransition = {
      provider: answer.provider,
      channel: answer.channel,
      to: change.transition,
      failureStreak: next.failureStreak,
      nextProbeAt: next.nextProbeAt,
    }
    // A phone provider back calls back every phone channel's held messages: they route across the family.
    if (change.transition === 'up')
      for (const channel of PHONE_CHANNELS.has(answer.channel) ? PHONE_CHANNELS : [answer.channel])
        transition.released = (transition.released ?? 0) + (await releaseHeldJobsTx(trx, channel, now))
    transitions.push(transition)
  }
  return transitions
}
