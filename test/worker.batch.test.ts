import { expect } from 'chai'
import { deliverBatch } from './support/run-once.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('delivery worker, a batch at a time', () => {
  const f = useOutboxFixture()
  const { message, attempts, ciphertexts, jobState } = f.rows

  /** `count` queued recovery codes, their message ids in enqueue order, and their jobs fetched as one batch. */
  const batchOf = async (count: number) => {
    const emails = Array.from({ length: count }, () => uniqueEmail())
    await f.harness.enqueueMany(emails)
    const ids: string[] = []
    for (const email of emails) ids.push((await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first()).id)
    const jobs = await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: count })
    expect(jobs).to.have.length(count)
    const jobOf = (messageId: string) => jobs.find((job) => job.data.messageId === messageId)!
    return { ids, jobs, jobOf }
  }

  it('claims and records a batch of 16 in a fixed number of statements, not a number per message', async () => {
    const { ids, jobs } = await batchOf(16)
    let statements = 0
    const count = () => (statements += 1)
    f.harness.worker.on('query', count)
    const provider = scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))
    try {
      await deliverBatch(f.harness.deps({ email: provider }), jobs)
    } finally {
      f.harness.worker.off('query', count)
    }
    expect(provider.calls).to.have.length(16)
    for (const id of ids) {
      expect(await message(id)).to.include({ state: 'published', attempt_count: 1 })
      expect(await ciphertexts(id)).to.equal(0)
    }
    for (const job of jobs) expect(await jobState(job.id)).to.equal('completed')
    // Claim: one statement (the common case). Suppression check: one for the batch. The providers'
    // states (the outage hold): one read for the batch. Record of publications: BEGIN, one statement
    // (lock, attempts, publish, ciphertext delete), job complete, the providers' streaks (one
    // statement that locks nothing while they are up), COMMIT. One message at a time took 13 × 16.
    expect(statements).to.be.at.most(8)
  })

  it('records the rest of a batch when one job lapsed during its send, and leaves that one to pg-boss', async () => {
    const { ids, jobOf } = await batchOf(3)
    const jobs = ids.map(jobOf)
    const lapsed = jobs[1]!
    const provider = scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))
    const lapsing = {
      ...provider,
      async dispatch(outgoing: Parameters<typeof provider.dispatch>[0], signal: AbortSignal) {
        // pg-boss expired this job's claim while its send was in flight.
        if (outgoing.messageId === lapsed.data.messageId)
          await f.db
            .owner('pgboss.job')
            .where({ id: lapsed.id })
            .update({ retry_count: lapsed.retryCount + 1, state: 'retry' })
        return await provider.dispatch(outgoing, signal)
      },
    }
    const { failedBack } = await deliverBatch(f.harness.deps({ email: lapsing }), jobs)

    expect(failedBack, 'the unrecorded job is failed back to pg-boss').to.deep.equal([lapsed])
    expect(f.logs.text()).to.include('delivery could not be recorded; pg-boss retries the job')
    expect(await message(ids[0]!)).to.include({ state: 'published' })
    expect(await message(ids[2]!)).to.include({ state: 'published' })
    expect(await message(ids[1]!)).to.include({ state: 'leased', attempt_count: 0 })
    expect(await attempts(ids[1]!)).to.have.length(0)
    expect(await ciphertexts(ids[1]!), 'the lapsed message can still be sent by the next holder').to.equal(1)
  })

  it('claims the rest of a batch when one job lapsed before its claim', async () => {
    const { ids, jobOf } = await batchOf(3)
    const jobs = ids.map(jobOf)
    // The first message is already final and its job lapsed: settling it cannot commit.
    await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: ids[0] }).delete()
    await f.db
      .owner('outbox.security_outbox_messages')
      .where({ id: ids[0] })
      .update({ state: 'dead_lettered', dead_lettered_at: new Date() })
    await f.db
      .owner('pgboss.job')
      .where({ id: jobs[0]!.id })
      .update({ retry_count: jobs[0]!.retryCount + 1, state: 'retry' })
    const provider = scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))

    const { failedBack } = await deliverBatch(f.harness.deps({ email: provider }), jobs)

    expect(failedBack, 'the lapsed job is failed back to pg-boss').to.deep.equal([jobs[0]])
    expect(f.logs.text()).to.include('"errorName":"LeaseLostError"')
    expect(provider.calls.map((call) => call.messageId)).to.have.members([ids[1], ids[2]])
    expect(await message(ids[1]!)).to.include({ state: 'published' })
    expect(await message(ids[2]!)).to.include({ state: 'published' })
  })

  it('sends once when two jobs for one message arrive in the same batch', async () => {
    const { ids, jobs } = await batchOf(1)
    await f.harness.workerBoss.send(QUEUES.delivery, { messageId: ids[0]! })
    const [duplicate] = await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery)
    const provider = scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))

    await deliverBatch(f.harness.deps({ email: provider }), [jobs[0]!, duplicate!])

    expect(provider.calls).to.have.length(1)
    expect(await message(ids[0]!)).to.include({ state: 'published', attempt_count: 1 })
    expect(await jobState(jobs[0]!.id)).to.equal('completed')
    expect(await jobState(duplicate!.id)).to.equal('completed')
    expect(f.logs.text()).to.include('held_by_another_job')
  })
})
