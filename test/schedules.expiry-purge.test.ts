import { randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { runExpiryPurge } from '../jobs/expiry-purge.ts'
import { recordOutcomesEach } from '../src/outbox/record.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { capturingLogger, insertOpenMessage } from './support/helpers.ts'
import { SCHEDULE, useOutboxFixture } from './support/outbox-harness.ts'

type Category = 'pendingExpired' | 'pendingLive' | 'leasedLive' | 'leasedLapsed' | 'published' | 'deadLettered'
const MIX: Record<Category, number> = {
  pendingExpired: 1000,
  pendingLive: 1000,
  leasedLive: 1000,
  leasedLapsed: 1000,
  published: 500,
  deadLettered: 500,
}

describe('expiry purge', () => {
  const f = useOutboxFixture()

  /** 5 000 messages on one challenge, each category with the pg-boss job state it implies. */
  async function arrangeMix() {
    const seed = await insertOpenMessage(f.db.owner)
    const { challenge_id: challengeId } = await f.db.owner('outbox.security_outbox_messages').where({ id: seed }).first()
    await f.db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: seed }).delete()
      await trx('outbox.security_outbox_messages').where({ id: seed }).delete()
    })
    const past = new Date(Date.now() - 60_000)
    const future = new Date(Date.now() + 600_000)
    const ids = {} as Record<Category, { id: string; jobId: string }[]>
    for (const [category, count] of Object.entries(MIX) as [Category, number][]) {
      ids[category] = Array.from({ length: count }, () => ({ id: randomUUID(), jobId: randomUUID() }))
    }
    const jobsFor: Category[] = ['pendingExpired', 'pendingLive', 'leasedLive', 'leasedLapsed']
    for (const category of jobsFor) {
      await f.harness.workerBoss.insert(
        QUEUES.delivery,
        ids[category].map(({ id, jobId }) => ({ id: jobId, data: { messageId: id } })),
      )
    }
    await f.db
      .owner('pgboss.job')
      .whereIn(
        'id',
        ids.leasedLive.map((row) => row.jobId),
      )
      .update({ state: 'active', started_on: f.db.owner.fn.now() })
    await f.db
      .owner('pgboss.job')
      .whereIn(
        'id',
        ids.leasedLapsed.map((row) => row.jobId),
      )
      .update({ state: 'retry', retry_count: 1 })

    const base = { purpose: 'password_recovery', challenge_id: challengeId, channel: 'email', destination: 'mix@example.com' }
    const rows = [
      ...ids.pendingExpired.map(({ id, jobId }) => ({ ...base, id, job_id: jobId, expires_at: past })),
      ...ids.pendingLive.map(({ id, jobId }) => ({ ...base, id, job_id: jobId, expires_at: future })),
      ...ids.leasedLive.map(({ id, jobId }) => ({
        ...base,
        id,
        job_id: jobId,
        expires_at: past,
        state: 'leased',
        lease_job_id: jobId,
        lease_retry_count: 0,
        leased_at: past,
      })),
      ...ids.leasedLapsed.map(({ id, jobId }) => ({
        ...base,
        id,
        job_id: jobId,
        expires_at: past,
        state: 'leased',
        lease_job_id: jobId,
        lease_retry_count: 0,
        leased_at: past,
      })),
      ...ids.published.map(({ id }) => ({ ...base, id, expires_at: past, state: 'published', published_at: past })),
      ...ids.deadLettered.map(({ id }) => ({ ...base, id, expires_at: past, state: 'dead_lettered', dead_lettered_at: past })),
    ]
    await f.db.owner.batchInsert('outbox.security_outbox_messages', rows, 1000)
    const open = [...ids.pendingExpired, ...ids.pendingLive, ...ids.leasedLive, ...ids.leasedLapsed]
    await f.db.owner.batchInsert(
      'outbox.security_outbox_ciphertexts',
      open.map(({ id }) => ({ message_id: id, envelope: 'v1.a.b.c.d' })),
      1000,
    )
    return ids
  }

  const purge = () =>
    runExpiryPurge({ db: f.harness.worker, boss: f.harness.workerBoss, clock: () => new Date(), logger: capturingLogger().logger })
  const states = async (rows: { id: string }[]) => {
    const found = (await f.db
      .owner('outbox.security_outbox_messages')
      .whereIn(
        'id',
        rows.map((row) => row.id),
      )
      .select('state')
      .count({ n: '*' })
      .groupBy('state')) as unknown as { state: string; n: string }[]
    return Object.fromEntries(found.map((row) => [row.state, Number(row.n)]))
  }

  it('dead-letters exactly the expired messages no live worker holds, cancels their jobs, and a rerun changes nothing', async function () {
    this.timeout(60_000)
    const ids = await arrangeMix()

    const first = await purge()
    expect(first.deadLettered).to.equal(MIX.pendingExpired + MIX.leasedLapsed)
    expect(first.batches).to.be.greaterThan(1)

    expect(await states(ids.pendingExpired)).to.deep.equal({ dead_lettered: 1000 })
    expect(await states(ids.leasedLapsed)).to.deep.equal({ dead_lettered: 1000 })
    expect(await states(ids.pendingLive)).to.deep.equal({ pending: 1000 })
    expect(await states(ids.leasedLive), 'a live lease wins, expired or not').to.deep.equal({ leased: 1000 })
    expect(await states(ids.published)).to.deep.equal({ published: 500 })
    expect(await states(ids.deadLettered)).to.deep.equal({ dead_lettered: 500 })

    const purged = [...ids.pendingExpired, ...ids.leasedLapsed]
    const reasons = (await f.db
      .owner('outbox.security_outbox_dead_letters')
      .whereIn(
        'message_id',
        purged.map((row) => row.id),
      )
      .select('reason')
      .count({ n: '*' })
      .groupBy('reason')) as unknown as { reason: string; n: string }[]
    expect(reasons.map((row) => [row.reason, Number(row.n)])).to.deep.equal([['challenge_expired', 2000]])
    const [left] = await f.db
      .owner('outbox.security_outbox_ciphertexts')
      .whereIn(
        'message_id',
        purged.map((row) => row.id),
      )
      .count({ n: '*' })
    expect(Number(left?.n)).to.equal(0)
    const jobStates = await f.db
      .owner('pgboss.job')
      .whereIn(
        'id',
        purged.map((row) => row.jobId),
      )
      .distinct('state')
      .pluck('state')
    expect(jobStates).to.deep.equal(['cancelled'])
    const liveJobs = await f.db
      .owner('pgboss.job')
      .whereIn(
        'id',
        ids.leasedLive.map((row) => row.jobId),
      )
      .distinct('state')
      .pluck('state')
    expect(liveJobs).to.deep.equal(['active'])

    expect(await purge()).to.deep.equal({ deadLettered: 0, batches: 0 })
  })

  it('never costs a worker its result when it records while the purge runs', async function () {
    this.timeout(60_000)
    const ids = await arrangeMix()
    const recorders = ids.leasedLive
      .slice(0, 50)
      .map(({ id, jobId }) =>
        recordOutcomesEach(
          f.harness.worker,
          f.harness.workerBoss,
          { maxAttempts: 5, retrySchedule: SCHEDULE },
          [{ messageId: id, lease: { jobId, retryCount: 0 }, outcome: { kind: 'published', providerMessageId: `p-${id}`, durationMs: 3 } }],
          new Date(),
        ).then(([result]) => result!),
      )
    const [purged, ...recorded] = await Promise.all([purge(), ...recorders])
    expect(purged.deadLettered).to.equal(MIX.pendingExpired + MIX.leasedLapsed)
    expect(recorded.map((result) => result.kind)).to.deep.equal(Array(50).fill('published'))
    expect(await states(ids.leasedLive.slice(0, 50))).to.deep.equal({ published: 50 })
    const [attempts] = await f.db
      .owner('outbox.security_outbox_attempts')
      .whereIn(
        'message_id',
        ids.leasedLive.slice(0, 50).map((row) => row.id),
      )
      .count({ n: '*' })
    expect(Number(attempts?.n)).to.equal(50)
  })
})
