import { expect } from 'chai'
import { QUEUES } from '../src/outbox/constants.ts'
import { startDeliveryPipeline } from '../src/runtime/delivery-pipeline.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { uniqueEmail, workerConfig } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { stalledProvider } from './support/scripted-provider.ts'

/**
 * A stop (SIGTERM runs `worker.stop()`) must never cause a duplicate: every send whose provider
 * call has begun is awaited, and its answer recorded, before the stop resolves and the process exits.
 */
describe('a graceful stop while a send is with the provider', () => {
  const f = useOutboxFixture()

  /** Resolves `true` once `promise` settles; `settled()` reads it without waiting. */
  const watch = (promise: Promise<unknown>) => {
    let done = false
    void promise.finally(() => (done = true))
    return { settled: () => done }
  }

  // Long enough for a stop that did not wait for the send to finish (it takes a few round trips).
  const aWhile = () => new Promise((resolve) => setTimeout(resolve, 300))

  /** The job of a message as pg-boss holds it: anything left to fetch would be sent again. */
  const leftToFetch = () => f.harness.workerBoss.fetch(QUEUES.delivery, { batchSize: 10, ignoreStartAfter: true })

  it('the worker stopped mid-send waits for the provider, records the send and completes its job: nothing is left to send again', async function () {
    this.timeout(30_000)
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 3_600)
    const stalled = stalledProvider('accepted-before-exit')
    const worker = await startWorker({
      config: workerConfig({ WORKER_CONCURRENCY: 2, SEND_TIMEOUT_MS: 10_000 }),
      workerUrl: f.db.workerUrl,
      keys: f.keys,
      providers: [stalled.provider],
      logger: f.logs.logger,
    })
    await stalled.sending
    const stopping = worker.stop()
    const stop = watch(stopping)
    await aWhile()
    expect(await f.rows.message(messageId)).to.include({ state: 'leased', attempt_count: 0 })
    expect(stop.settled(), 'the stop returned while a send was with the provider').to.equal(false)

    stalled.release()
    await stopping

    expect(await f.rows.message(messageId)).to.include({ state: 'published', attempt_count: 1 })
    const attempts = await f.rows.attempts(messageId)
    expect(attempts.map((row) => [row.attempt_no, row.provider_message_id])).to.deep.equal([[1, 'accepted-before-exit']])
    const job = await f.db.owner('pgboss.job').where({ name: QUEUES.delivery }).whereRaw("data->>'messageId' = ?", [messageId]).first()
    expect(job.state, 'the job of a recorded send').to.equal('completed')
    expect(await leftToFetch(), 'jobs a restarted worker would send again').to.deep.equal([])
  })

  it('the pipeline stopped while a run is mid-send settles that run first: recorded as sent, the job completed', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 3_600)
    const job = await f.harness.nextJob()
    const stalled = stalledProvider('accepted-during-stop')
    const pipeline = startDeliveryPipeline(f.harness.deps({ email: stalled.provider }), { concurrency: 1, fetch: false })
    const running = pipeline.run([job])
    await stalled.sending
    const stopping = pipeline.stop()
    const stop = watch(stopping)
    await aWhile()
    expect(stop.settled(), 'the stop returned while a send was with the provider').to.equal(false)

    stalled.release()
    await stopping
    expect(stop.settled()).to.equal(true)
    expect(await running).to.deep.equal({ failedBack: [] })
    expect(await f.rows.message(messageId)).to.include({ state: 'published', attempt_count: 1 })
    expect(await f.rows.jobState(job.id)).to.equal('completed')
    expect(await leftToFetch()).to.deep.equal([])
  })
})
