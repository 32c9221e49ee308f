import { expect } from 'chai'
import { createCrashLoopQueueHandler } from '../jobs/crash-loop-queue.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

/** docs/architecture.md §5: only a real crash loop dead-letters through the crash-loop queue. */
describe('the crash-loop queue against a forged job', () => {
  const f = useOutboxFixture()
  const { message, deadLetter } = f.rows
  const handler = () =>
    createCrashLoopQueueHandler({ db: f.harness.worker, boss: f.harness.workerBoss, clock: () => f.now, logger: f.logs.logger })
  const refusal = (sql: string, bindings: unknown[]) =>
    f.harness.api.raw(sql, bindings as never).then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  it('refuses the api login a job in any queue but security-outbox, in any state but created, through the table or its partition', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail())
    const data = JSON.stringify({ messageId })
    expect(
      await refusal('INSERT INTO pgboss.job (name, data) VALUES (?, ?::jsonb)', [QUEUES.crashLoop, data]),
      'the crash-loop queue',
    ).to.equal('42501')
    expect(
      await refusal('INSERT INTO pgboss.job_common (name, data) VALUES (?, ?::jsonb)', [QUEUES.crashLoop, data]),
      'its partition',
    ).to.equal('42501')
    expect(
      await refusal('INSERT INTO pgboss.job (name, data) VALUES (?, ?::jsonb)', [QUEUES.expiryPurge, data]),
      'a maintenance queue',
    ).to.equal('42501')
    expect(
      await refusal(`INSERT INTO pgboss.job (name, data, state) VALUES (?, ?::jsonb, 'failed')`, [QUEUES.delivery, data]),
      'a failed delivery job',
    ).to.equal('42501')
    expect(
      await refusal(`INSERT INTO pgboss.job_common (name, data, state) VALUES (?, ?::jsonb, 'active')`, [QUEUES.delivery, data]),
      'an active delivery job',
    ).to.equal('42501')
    expect(await f.db.owner('pgboss.job').whereNot({ name: QUEUES.delivery })).to.have.length(0)
  })

  it('dead-letters nothing for a crash-loop queue job whose message’s delivery job never failed', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail())
    // However the row got there (a path the grants do not foresee), it names a live message.
    await f.db.owner.raw('INSERT INTO pgboss.job (name, data) VALUES (?, ?::jsonb)', [QUEUES.crashLoop, JSON.stringify({ messageId })])
    const [forged] = await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.crashLoop)
    await handler()([forged!])

    expect(await message(messageId)).to.include({ state: 'pending' })
    expect(await deadLetter(messageId)).to.equal(undefined)
    expect(await f.rows.jobState(forged!.id)).to.equal('completed')
    expect(f.logs.text()).to.include('crash-loop queue job refused')
  })

  it('dead-letters a message whose own delivery job really exhausted pg-boss’s retries', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail())
    const job = await f.harness.nextJob()
    // The job has crashed its worker as often as the queue allows; this failure is the last.
    await f.db
      .owner('pgboss.job')
      .where({ id: job.id })
      .update({ retry_count: f.db.owner.ref('retry_limit') })
    await f.harness.workerBoss.fail(QUEUES.delivery, job.id)
    expect(await f.rows.jobState(job.id)).to.equal('failed')
    const [crashLoopJob] = await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.crashLoop)
    expect(crashLoopJob?.data).to.deep.equal({ messageId })
    await handler()([crashLoopJob!])

    expect(await message(messageId)).to.include({ state: 'dead_lettered' })
    expect(await deadLetter(messageId)).to.include({ reason: 'worker_crash_loop' })
  })
})
