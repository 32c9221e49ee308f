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
    const ran = () => [...workers, ...stopped].reduce((sum, worker) => sum + (worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0), 0)
    await eventually(async () => (ran() >= 3 ? true : undefined), 'three purge ticks', 220_000)
    // Stop both gracefully, so every run that logged has also been settled in pg-boss.
    for (const worker of workers.splice(0)) {
      worker.child.kill('SIGTERM')
      expect(await worker.exited).to.equal(0)
      stopped.push(worker)
    }

    const jobs = await f.db.owner('pgboss.job').where({ name: QUEUES.expiryPurge, state: 'completed' }).select('id', 'created_on', 'retry_count')
    expect(jobs.length, 'one completed job per summary line').to.equal(ran())
    const minutes = new Set(jobs.map((job) => Math.floor(new Date(job.created_on).getTime() / 60_000)))
    expect(minutes.size, 'one job per minute tick, never two for one tick').to.equal(jobs.length)
    expect(jobs.every((job) => job.retry_count === 0)).to.equal(true)
    const runsPerWorker = stopped.map((worker) => worker.output().match(/"message":"expiry purge done"/g)?.length ?? 0)
    expect(runsPerWorker.reduce((a, b) => a + b, 0)).to.equal(jobs.length)
  })
})
