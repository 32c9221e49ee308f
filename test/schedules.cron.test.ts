import { expect } from 'chai'
import { QUEUES } from '../src/outbox/constants.ts'
import { eventually } from './support/helpers.ts'
import { useProcessFixture } from './support/process-fixture.ts'
import type { Spawned } from './support/processes.ts'

describe('schedules across a worker fleet', () => {
  const f = useProcessFixture()

  it('runs each tick of the expiry purge once, whichever of two workers takes it', async function () {
    // pg-boss cron ticks at most once a minute, so three ticks take up to three minutes of waiting.
    this.timeout(240_000)
    // The smallest cron pg-boss honours: every minute.
    const settings = { EXPIRY_PURGE_CRON: '* * * * *', RETENTION_SWEEP_CRON: '0 0 1 1 *' }
    const workers = [f.worker(settings), f.worker(settings)]
    const stopped: Spawned[] = []
    const ran = () =>
      [...workers, ...stopped].reduce((sum, worker) => sum + (worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0), 0)
    await eventually(async () => (ran() >= 3 ? true : undefined), 'three purge ticks', 220_000)
    // Stop both gracefully, so every run that logged has also been settled in pg-boss.
    for (const worker of workers.splice(0)) {
      worker.child.kill('SIGTERM')
      expect(await worker.exited).to.equal(0)
      stopped.push(worker)
    }

    const jobs = await f.db
      .owner('pgboss.job')
      .where({ name: QUEUES.expiryPurge, state: 'completed' })
      .select('id', 'created_on', 'retry_count')
    expect(jobs.length, 'one completed job per summary line').to.equal(ran())
    // pg-boss files each tick under its minute's slot (a tick a loaded pass missed is caught up later,
    // under its own slot, so two jobs may be created in one minute): one job per slot, never two.
    const forwarded: { slot: string | null }[] = await f.db
      .owner('pgboss.job')
      .where({ name: '__pgboss__send-it' })
      .whereRaw("data->>'name' = ?", [QUEUES.expiryPurge])
      .select(f.db.owner.raw("data->>'slot' AS slot"))
    expect(
      forwarded.every((row) => row.slot !== null),
      'every tick names its slot',
    ).to.equal(true)
    expect(new Set(forwarded.map((row) => row.slot)).size, 'one job per tick slot, never two for one slot').to.equal(jobs.length)
    expect(jobs.every((job) => job.retry_count === 0)).to.equal(true)
    const runsPerWorker = stopped.map((worker) => worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0)
    expect(runsPerWorker.reduce((a, b) => a + b, 0)).to.equal(jobs.length)
  })
})
