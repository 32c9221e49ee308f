import { expect } from 'chai'
import type { Knex } from 'knex'
import { createKnex } from '../src/db/knex.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { deliverOne } from './support/run-once.ts'
import { stalledProvider } from './support/scripted-provider.ts'

/**
 * "a worker's record of a send the provider had already accepted rolled back, and the
 * code was sent twice". The record of a send that left must be tried again after a transient
 * database error, not failed back to pg-boss (whose retry sends the code again).
 */
describe('the record of a send that left, beside a transient database error', () => {
  const f = useOutboxFixture()
  let worker: Knex

  beforeEach(() => {
    // The worker's own pool, whose waits for a lock end after 200 ms with 55P03 (as a deadlock ends with 40P01).
    worker = createKnex(f.db.workerUrl, { applicationName: 'test-worker-short-locks', max: 4, lockTimeoutMs: 200 })
  })
  afterEach(() => worker.destroy())

  async function recordLockWaits(): Promise<number> {
    const { rows } = await f.db.owner.raw<{ rows: { waits: number }[] }>(
      `SELECT count(*)::int AS waits FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE NOT l.granted AND a.application_name = 'test-worker-short-locks'`,
    )
    return rows[0]!.waits
  }

  /** Polls until `probe` holds (test/support/helpers.ts `eventually`). */
  const until = (probe: () => Promise<boolean>, what: string) => eventually(async () => ((await probe()) ? true : undefined), what)

  it('a record that times out on a lock once is recorded by a retry: published once, the job completed, never failed back to resend', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 3_600)
    const job = await f.harness.nextJob()
    const { provider, sending, release } = stalledProvider('provider-accepted-1')
    const delivering = deliverOne({ ...f.harness.deps({ email: provider }), db: worker }, job)
    await sending
    // The provider has accepted; now the record's insert of the attempt must wait for this lock.
    const holder = await f.db.owner.transaction()
    try {
      await holder.raw('LOCK TABLE outbox.security_outbox_attempts IN SHARE MODE')
      release()
      await until(async () => (await recordLockWaits()) > 0, 'the record to wait on the lock')
      await until(async () => (await recordLockWaits()) === 0, 'its lock_timeout')
    } finally {
      await holder.rollback()
    }
    const { failedBack } = await delivering

    expect(failedBack, 'failed back to pg-boss, which would send the code again').to.deep.equal([])
    expect(await f.rows.message(messageId)).to.include({ state: 'published', attempt_count: 1 })
    expect(await f.rows.attempts(messageId)).to.have.length(1)
    expect(await f.rows.jobState(job.id)).to.equal('completed')
    expect(f.logs.text()).to.include('transient database error: retrying')
  })
})
