import type { Knex } from 'knex'
import { providerWindowTx } from './attempts-sql.ts'
import type { Channel } from './constants.ts'
import { PHONE_CHANNELS } from './destination.ts'
import { releaseHeldJobsTx } from './pgboss-jobs-sql.ts'
import type { ProviderAnswers } from './provider-answers.ts'
import {
  afterAnswer,
  afterFailedProbe,
  heldDown,
  windowTrips,
  type HealthChange,
  type HealthPolicy,
  type ProviderHealth,
  type ProviderTransition,
} from './provider-health.ts'

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
  paused_until?: Date | null
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
  pausedUntil: row.paused_until ?? null,
})

/**
 * Every provider's state as the fleet holds it, with the end of its throttle pause when one runs
 * at `now` (one statement: the routing of a batch reads it once). A provider with no row has never
 * been held (up); one with only a pause is up and paused.
 */
export async function providerStates(db: Knex | Knex.Transaction, now: Date = new Date()): Promise<Map<string, ProviderHealth>> {
  const { rows } = await db.raw<{ rows: Row[] }>(
    `SELECT coalesce(s.provider, p.provider) AS provider, coalesce(s.channel, p.channel) AS channel, coalesce(s.state, 'up') AS state,
            coalesce(s.failure_streak, 0) AS failure_streak, s.last_failure_at, s.down_since, s.probe_interval_ms, s.next_probe_at,
            s.probe_until, p.paused_until
       FROM ${STATES} s
       FULL JOIN (SELECT provider, channel, paused_until FROM outbox.paused_providers WHERE paused_until > ?) p ON p.provider = s.provider
      ORDER BY 1`,
    [now],
  )
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
 * Takes the probe lease of a provider held down, for this worker's next probes (up to the policy's
 * half-open probes): only when its next probe is due and no other lease runs. The lease lapses by
 * itself at `until`, so a prober that crashed never keeps the hold shut. True when this caller won it.
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

/** The provider's row, created (up) if it has none, locked to the end of the transaction. */
async function lockStateTx(trx: Knex.Transaction, answer: ProviderAnswers): Promise<ProviderHealth> {
  await trx.raw(`INSERT INTO ${STATES} (provider, channel, updated_at) VALUES (?, ?, now()) ON CONFLICT (provider) DO NOTHING`, [
    answer.provider,
    answer.channel,
  ])
  return healthOf(await trx(STATES).where({ provider: answer.provider }).forUpdate().first<Row>())
}

/**
 * What one provider's answers do to its breaker: a misconfiguration holds it at once; provider-side
 * failures read its window (the attempt rows of the fleet, this transaction's included) and hold it
 * when the window trips; a probe's answer closes it, a failed probe pushes the next one out. The
 * row is locked only for a change (an up provider's failures below the threshold lock nothing).
 */
async function changeOfTx(
  trx: Knex.Transaction,
  answer: ProviderAnswers,
  now: Date,
  policy: HealthPolicy,
): Promise<HealthChange | undefined> {
  if (answer.misconfigured) {
    const current = await lockStateTx(trx, answer)
    return current.state === 'up'
      ? heldDown(current, 0, now, policy)
      : answer.probeFailed
        ? afterFailedProbe(current, now, policy)
        : undefined
  }
  if (answer.probeAnswered) {
    const current = await lockStateTx(trx, answer)
    return current.state === 'down' ? afterAnswer(current) : undefined
  }
  if (answer.probeFailed) return afterFailedProbe(await lockStateTx(trx, answer), now, policy)
  const window = await providerWindowTx(trx, answer.provider, {
    since: new Date(now.getTime() - policy.windowMs),
    until: now,
    limit: policy.windowCalls,
  })
  if (!windowTrips(window, policy)) return undefined
  const current = await lockStateTx(trx, answer)
  return current.state === 'up' ? heldDown(current, window.failures, now, policy) : undefined
}

/**
 * The record step's part of the breaker, in its transaction, provider by provider in id order (so
 * two transactions lock rows in the same order). A provider back up calls its held messages back at
 * once, in order of expiry (a phone provider: every phone channel's, they route across the family).
 */
export async function noteProviderAnswersTx(
  trx: Knex.Transaction,
  answers: readonly ProviderAnswers[],
  now: Date,
  policy: HealthPolicy,
): Promise<ProviderTransition[]> {
  const transitions: ProviderTransition[] = []
  for (const answer of [...answers].sort((a, b) => a.provider.localeCompare(b.provider))) {
    const change = await changeOfTx(trx, answer, now, policy)
    if (!change?.transition) continue
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
    const transition: ProviderTransition = {
      provider: answer.provider,
      channel: answer.channel,
      to: change.transition,
      failureStreak: next.failureStreak,
      nextProbeAt: next.nextProbeAt,
    }
    if (change.transition === 'up')
      for (const channel of PHONE_CHANNELS.has(answer.channel) ? PHONE_CHANNELS : [answer.channel])
        transition.released = (transition.released ?? 0) + (await releaseHeldJobsTx(trx, channel, now))
    transitions.push(transition)
  }
  return transitions
}
