import { expect } from 'chai'
import { createBoss, installQueues } from '../src/db/boss.ts'
import { startSesEmulator } from '../src/runtime/ses-emulator.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { startFakeWasender } from './support/fake-wasender.ts'
import { capturingLogger, eventually, testKeys, uniquePhone } from './support/helpers.ts'
import { outboxHarness, outboxRows } from './support/outbox-harness.ts'
import { productionEnvironment, spawnWorker } from './support/processes.ts'

const LEASE_SECONDS = 9
const SEND_TIMEOUT_MS = 2_000

describe('a worker killed mid-delivery', () => {
  let db: TestDatabase
  let harness: Awaited<ReturnType<typeof outboxHarness>>
  let fake: Awaited<ReturnType<typeof startFakeWasender>>
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  const keys = testKeys()
  const logs = capturingLogger()
  const rows = outboxRows(() => db)

  before(async () => {
    db = await createTestDatabase()
    // A short lease, as the release step would set it from LEASE_SECONDS, so the test waits seconds.
    const owner = createBoss(db.ownerUrl, 'release', logs.logger)
    await owner.start()
    await installQueues(owner, { LEASE_SECONDS })
    await owner.stop({ graceful: false })
    harness = await outboxHarness(db, { keys, clock: () => new Date(), logger: logs.logger })
    fake = await startFakeWasender('key')
    emulator = await startSesEmulator(0)
  })
  after(async () => {
    await fake.stop()
    await emulator.stop()
    await harness.close()
    await db.drop()
  })

  it('is redelivered by another worker after its lease: published, the duplicate counted, nothing lost', async function () {
    this.timeout(90_000)
    // The provider takes the first request (the person gets the code) but the answer never comes back.
    fake.behave((call) => (call === 1 ? { kind: 'accept-then-hang' } : { kind: 'accept' }))
    const phone = uniquePhone()
    const { messageId } = await harness.enqueue(phone)
    const env = productionEnvironment({
      apiUrl: db.apiUrl,
      workerUrl: db.workerUrl,
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: fake.url,
      wasenderKey: 'key',
      extra: { LEASE_SECONDS: String(LEASE_SECONDS), SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS) },
    })

    const first = spawnWorker(env)
    await eventually(async () => (fake.requests.length === 1 ? true : undefined), 'the first worker to reach the provider', 30_000)
    first.child.kill('SIGKILL')
    await first.exited
    expect(await rows.message(messageId)).to.include({ state: 'leased', attempt_count: 0 })

    const second = spawnWorker(env)
    try {
      const published = await eventually(async () => {
        const message = await rows.message(messageId)
        return message.state === 'published' ? message : undefined
      }, 'the second worker to redeliver after the lease', 60_000)
      expect(published.attempt_count).to.equal(1)
    } finally {
      second.child.kill('SIGTERM')
      await second.exited
    }
    const accepted = fake.accepted().filter((request) => request.to === phone)
    expect(accepted, 'sent twice: at-least-once, a duplicate rather than a loss').to.have.length(2)
    expect((await rows.attempts(messageId)).map((row) => [row.attempt_no, row.outcome])).to.deep.equal([[1, 'published']])
    expect(await rows.ciphertexts(messageId)).to.equal(0)
  })
})
