import { expect } from 'chai'
import { startSesEmulator } from '../src/runtime/ses-emulator.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { startFakeWasender } from './support/fake-wasender.ts'
import { eventually, testKeys } from './support/helpers.ts'
import { productionEnvironment, spawnWorker, type Spawned } from './support/processes.ts'

describe('schedules across a worker fleet', () => {
  let db: TestDatabase
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>
  const workers: Spawned[] = []

  before(async () => {
    db = await createTestDatabase()
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('key')
  })
  after(async () => {
    for (const worker of workers) {
      worker.child.kill('SIGTERM')
      await worker.exited
    }
    await wasender.stop()
    await emulator.stop()
    await db.drop()
  })

  it('runs each tick of the expiry purge once, whichever of two workers takes it', async function () {
    // pg-boss cron ticks at most once a minute, so three ticks take up to three minutes of waiting.
    this.timeout(240_000)
    const env = productionEnvironment({
      apiUrl: db.apiUrl,
      workerUrl: db.workerUrl,
      keys: testKeys(),
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'key',
      // The smallest cron pg-boss honours: every minute.
      extra: { EXPIRY_PURGE_CRON: '* * * * *', RETENTION_SWEEP_CRON: '0 0 1 1 *' },
    })
    workers.push(spawnWorker(env), spawnWorker(env))
    const stopped: Spawned[] = []
    const ran = () => [...workers, ...stopped].reduce((sum, worker) => sum + (worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0), 0)
    await eventually(async () => (ran() >= 3 ? true : undefined), 'three purge ticks', 220_000)
    // Stop both gracefully, so every run that logged has also been settled in pg-boss.
    for (const worker of workers.splice(0)) {
      worker.child.kill('SIGTERM')
      expect(await worker.exited).to.equal(0)
      stopped.push(worker)
    }

    const jobs = await db.owner('pgboss.job').where({ name: QUEUES.expiryPurge, state: 'completed' }).select('id', 'created_on', 'retry_count')
    expect(jobs.length, 'one completed job per summary line').to.equal(ran())
    const minutes = new Set(jobs.map((job) => Math.floor(new Date(job.created_on).getTime() / 60_000)))
    expect(minutes.size, 'one job per minute tick, never two for one tick').to.equal(jobs.length)
    expect(jobs.every((job) => job.retry_count === 0)).to.equal(true)
    const runsPerWorker = stopped.map((worker) => worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0)
    expect(runsPerWorker.reduce((a, b) => a + b, 0)).to.equal(jobs.length)
  })
})
