import { expect } from 'chai'
import { createWasenderConnector } from '../src/providers/wasender/connector.ts'
import { startWorker, type RunningWorker } from '../src/runtime/worker.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { capturingLogger, eventually, testKeys, uniquePhone, workerConfig } from './support/helpers.ts'
import { outboxHarness } from './support/outbox-harness.ts'

describe('provider back-pressure', () => {
  let db: TestDatabase
  let harness: Awaited<ReturnType<typeof outboxHarness>>
  let fake: Awaited<ReturnType<typeof startFakeWasender>>
  let worker: RunningWorker | undefined
  const keys = testKeys()
  const logs = capturingLogger()

  before(async () => {
    db = await createTestDatabase()
    harness = await outboxHarness(db, { keys, clock: () => new Date(), logger: logs.logger })
    fake = await startFakeWasender('key')
  })
  after(async () => {
    await worker?.stop()
    await fake.stop()
    await harness.close()
    await db.drop()
  })

  it('pauses Wasender for the whole fleet after a 429 with Retry-After, deferring 100 queued messages without spending their attempts', async function () {
    this.timeout(60_000)
    fake.behave((call) => (call === 1 ? { kind: 'status', status: 429, headers: { 'retry-after': '30' } } : { kind: 'accept' }))
    await harness.enqueueMany(Array.from({ length: 100 }, () => uniquePhone()))
    const connector = createWasenderConnector({ apiUrl: fake.url, apiKey: 'key' })
    worker = await startWorker({
      config: workerConfig(),
      workerUrl: db.workerUrl,
      keys,
      providers: [connector],
      logger: logs.logger,
    })

    const pause = await eventually(
      async () => (await db.owner('outbox.paused_providers').where({ provider: 'wasender' }).first()) ?? undefined,
      'the provider pause',
    )
    const pausedUntil: Date = pause.paused_until
    // Settled: every message is published, or pending until the pause ends, and no job is left due before it.
    await eventually(
      async () => {
        const [open] = await db
          .owner('outbox.security_outbox_messages')
          .count({ open: '*' })
          // knex builds the sub-clause on `q` and ignores the callback's value (a thenable builder, not a promise).
          .where((q) => {
            q.where({ state: 'leased' }).orWhere((p) => {
              p.where({ state: 'pending' }).andWhere('available_at', '<', new Date(pausedUntil.getTime() - 1_000))
            })
          })
        const [due] = await db
          .owner('pgboss.job')
          .count({ due: '*' })
          .where({ name: 'security-outbox' })
          .whereIn('state', ['created', 'retry', 'active'])
          .andWhere('start_after', '<', new Date(pausedUntil.getTime() - 1_000))
        return Number(open?.open) === 0 && Number(due?.due) === 0 ? true : undefined
      },
      'every message to be published or deferred',
      30_000,
    )
    await worker.stop()
    worker = undefined

    const calls = fake.requests.length
    expect(calls, 'provider calls: the 429 plus the sends already in flight').to.be.at.most(8)
    const messages = await db.owner('outbox.security_outbox_messages').select('state', 'attempt_count', 'available_at')
    const published = messages.filter((row) => row.state === 'published')
    const deferred = messages.filter((row) => row.state === 'pending')
    expect(published.length + deferred.length).to.equal(100)
    expect(published).to.have.length(fake.accepted().length)
    expect(
      deferred.filter((row) => row.attempt_count === 1),
      'only the throttled message spent an attempt',
    ).to.have.length(1)
    expect(deferred.filter((row) => row.attempt_count === 0)).to.have.length(deferred.length - 1)
    for (const row of deferred) expect(row.available_at.getTime()).to.be.closeTo(pausedUntil.getTime(), 1_000)
    expect(pausedUntil.getTime()).to.be.closeTo(Date.now() + 30_000, 10_000)
  })
})
