import { expect } from 'chai'
import { WITHOUT_PROVIDER_WAIT_MS } from '../jobs/deliver-holds.ts'
import { deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { LAST_CHANCE_LEAD_MS } from '../src/outbox/retry-policy.ts'
import { createWorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider, stalledProvider } from './support/scripted-provider.ts'

describe('delivery worker, one job at a time', () => {
  const f = useOutboxFixture()
  const { message, attempts, ciphertexts, jobState, deadLetter } = f.rows

  const deps = (provider: Provider) => f.harness.deps({ email: provider })
  const enqueue = async () => {
    const email = uniqueEmail()
    return { ...(await f.harness.enqueue(email, 3_600)), email }
  }
  const nextJob = () => f.harness.nextJob()

  it('schedules a throttled send for the later of the schedule and Retry-After, in the same commit as the attempt', async () => {
    const { messageId } = await enqueue()
    const retryAfter = new Date(f.now.getTime() + 45_000)
    const provider = scriptedProvider(() => new DeliveryFailureError('THROTTLED', 'TooManyRequestsException', retryAfter))
    const job = await nextJob()

    await deliverOne(deps(provider), job)

    expect(await message(messageId)).to.include({ state: 'pending', attempt_count: 1, lease_job_id: null })
    expect((await message(messageId)).available_at.getTime()).to.equal(retryAfter.getTime())
    const [attempt] = await attempts(messageId)
    expect(attempt).to.include({ attempt_no: 1, outcome: 'retryable_error', failure_class: 'THROTTLED' })
    expect(attempt.retry_after_at.getTime()).to.equal(retryAfter.getTime())
    expect(await jobState(job.id)).to.equal('completed')
    const next = await f.db.owner('pgboss.job').where({ name: QUEUES.delivery, state: 'created' }).first()
    expect(next.data).to.deep.equal({ messageId })
    expect(next.start_after.getTime()).to.be.closeTo(retryAfter.getTime(), 1_000)
    expect(await ciphertexts(messageId)).to.equal(1)
  })

  it('a WhatsApp message on a worker with email only spends no attempt: it waits a minute, logged as MISCONFIGURATION and counted', async () => {
    const phone = uniquePhone()
    const { messageId } = await f.harness.enqueue(phone, 3_600)
    const email = scriptedProvider(() => ({ providerMessageId: 'never' }))
    const metrics = createWorkerMetrics()
    const emailOnly = { ...deps(email), metrics }

    await deliverOne(emailOnly, await nextJob())

    expect(await message(messageId)).to.include({ state: 'pending', attempt_count: 0, lease_job_id: null })
    expect(await attempts(messageId)).to.have.length(0)
    expect(await ciphertexts(messageId)).to.equal(1)
    expect(email.calls).to.have.length(0)
    const next = await f.db.owner('pgboss.job').where({ name: QUEUES.delivery, state: 'created' }).first()
    expect(next.data).to.deep.equal({ messageId })
    expect(next.start_after.getTime()).to.be.closeTo(f.now.getTime() + WITHOUT_PROVIDER_WAIT_MS, 1_000)

    // Again within the minute: counted again, logged once.
    await deliverOne(emailOnly, await nextJob())
    expect(await message(messageId)).to.include({ state: 'pending', attempt_count: 0 })
    const counted = (await metrics.registry.getSingleMetricAsString('sealpost_messages_without_provider_total')).trim()
    expect(counted).to.match(/^sealpost_messages_without_provider_total\{channel="whatsapp"\} 2$/m)
    const lines = f.logs
      .text()
      .split('\n')
      .filter((line) => line.includes('MISCONFIGURATION'))
    expect(lines).to.have.length(1)
    expect(JSON.parse(lines[0]!)).to.include({ channel: 'whatsapp', messageId })
    expect(f.logs.text()).not.to.include(phone).and.not.to.include(phone.slice(1))
  })

  it('a message this worker has no provider for takes no send-cap slot: it waits a minute, not the hour', async () => {
    const { messageId } = await f.harness.enqueueStrangers(uniquePhone(), 3_600)
    const capped = {
      ...deps(scriptedProvider(() => ({ providerMessageId: 'never' }))),
      sendCaps: { perChannel: { whatsapp: 1 }, perCountry: { '*': 1 } },
    }
    await deliverOne(capped, await nextJob())
    expect(await message(messageId)).to.include({ state: 'pending', attempt_count: 0 })
    expect((await message(messageId)).available_at.getTime()).to.be.closeTo(f.now.getTime() + WITHOUT_PROVIDER_WAIT_MS, 1_000)
    expect(await f.db.owner('outbox.send_windows').sum('sent as sent').first()).to.deep.equal({ sent: null })
  })

  it('expiry still wins over waiting for a provider: a code that would expire in the wait is dead-lettered, never sent late', async () => {
    const { messageId } = await f.harness.enqueue(uniquePhone(), 30)
    await deliverOne(deps(scriptedProvider(() => ({ providerMessageId: 'never' }))), await nextJob())
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(await deadLetter(messageId)).to.include({ reason: 'challenge_expired' })
    expect(await ciphertexts(messageId)).to.equal(0)
  })

  it('dead-letters a rejected destination at once and deletes the ciphertext', async () => {
    const { messageId } = await enqueue()
    await deliverOne(deps(scriptedProvider(() => new DeliveryFailureError('REJECTED', 'MessageRejected'))), await nextJob())
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 1 })
    expect(await deadLetter(messageId)).to.include({ reason: 'provider_rejected', last_failure_class: 'REJECTED' })
    expect(await ciphertexts(messageId)).to.equal(0)
  })

  it('spends five attempts on transport faults, then dead-letters retries_exhausted with the last class', async () => {
    const { messageId } = await enqueue()
    const provider = scriptedProvider((call) =>
      call < 5 ? new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable') : new Error('socket hang up'),
    )
    const SCHEDULE = [5_000, 30_000, 120_000, 600_000]
    for (let attempt = 1; attempt <= 5; attempt++) {
      await deliverOne(deps(provider), await nextJob())
      f.now = new Date(f.now.getTime() + SCHEDULE[attempt - 1]!)
    }
    expect(provider.calls).to.have.length(5)
    expect((await attempts(messageId)).map((row) => [row.attempt_no, row.outcome, row.failure_class])).to.deep.equal([
      [1, 'retryable_error', 'UNAVAILABLE'],
      [2, 'retryable_error', 'UNAVAILABLE'],
      [3, 'retryable_error', 'UNAVAILABLE'],
      [4, 'retryable_error', 'UNAVAILABLE'],
      [5, 'failed', 'unexpected_worker_error'],
    ])
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 5 })
    expect(await deadLetter(messageId)).to.include({ reason: 'retries_exhausted', last_failure_class: 'unexpected_worker_error' })
    expect(await f.db.owner('pgboss.job').where({ name: QUEUES.delivery }).whereNot({ state: 'completed' })).to.have.length(0)
  })

  it('gives a code whose fourth attempt fails with minutes of validity left a last chance a minute before expiry', async () => {
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 600)
    const { expires_at: expiresAt } = await message(messageId)
    // A 3-minute outage: attempts 1 to 4 fail; the 10-minute step after the fourth would overshoot the expiry.
    const provider = scriptedProvider((call) =>
      call <= 4 ? new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable') : { providerMessageId: 'late' },
    )
    for (const wait of [5_000, 30_000, 120_000]) {
      await deliverOne(deps(provider), await nextJob())
      f.now = new Date(f.now.getTime() + wait)
    }
    await deliverOne(deps(provider), await nextJob())

    expect(await message(messageId)).to.include({ state: 'pending', attempt_count: 4 })
    expect(await deadLetter(messageId)).to.equal(undefined)
    const lastChance = expiresAt.getTime() - LAST_CHANCE_LEAD_MS
    expect((await message(messageId)).available_at.getTime()).to.equal(lastChance)
    expect((await f.rows.queuedJob(messageId)).start_after.getTime()).to.be.closeTo(lastChance, 1_000)

    f.now = new Date(lastChance)
    await deliverOne(deps(provider), await nextJob())
    expect(provider.calls).to.have.length(5)
    expect(await message(messageId)).to.include({ state: 'published', attempt_count: 5 })
    expect((await attempts(messageId)).map((row) => [row.attempt_no, row.outcome])).to.deep.equal([
      [1, 'retryable_error'],
      [2, 'retryable_error'],
      [3, 'retryable_error'],
      [4, 'retryable_error'],
      [5, 'published'],
    ])
  })

  it('never sends a code whose challenge has expired', async () => {
    const { messageId } = await enqueue()
    const provider = scriptedProvider(() => ({ providerMessageId: 'never' }))
    f.now = new Date(f.now.getTime() + 3_600_000)
    await deliverOne(deps(provider), await nextJob())
    expect(provider.calls).to.have.length(0)
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(await deadLetter(messageId)).to.include({ reason: 'challenge_expired' })
  })

  it('dead-letters a tampered envelope as decryption_failed, without sending or retrying, and flags it for security', async () => {
    const { messageId } = await enqueue()
    const { envelope } = await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).first()
    const parts = envelope.split('.')
    parts[3] = Buffer.from('tampered').toString('base64url')
    await f.db
      .owner('outbox.security_outbox_ciphertexts')
      .where({ message_id: messageId })
      .update({ envelope: parts.join('.') })
    const provider = scriptedProvider(() => ({ providerMessageId: 'never' }))
    const job = await nextJob()

    await deliverOne(deps(provider), job)

    expect(provider.calls).to.have.length(0)
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(await deadLetter(messageId)).to.include({ reason: 'decryption_failed' })
    expect(await jobState(job.id)).to.equal('completed')
    expect(f.logs.text()).to.match(/"level":"error".*"security":true/)
  })

  it('records nothing for a worker whose lease was taken over, and lets the new holder record', async () => {
    const { messageId } = await enqueue()
    const job = await nextJob()
    const stalled = stalledProvider('first')
    const first = deliverOne(deps(stalled.provider), job)
    // The first worker is stuck in its send; pg-boss expires its claim and hands the job out again.
    await stalled.sending
    await f.db
      .owner('pgboss.job')
      .where({ id: job.id })
      .update({ retry_count: job.retryCount + 1 })
    const second = scriptedProvider(() => ({ providerMessageId: 'second' }))
    await deliverOne(deps(second), { ...job, retryCount: job.retryCount + 1 })
    stalled.release()
    await first

    expect(await message(messageId)).to.include({ state: 'published', attempt_count: 1 })
    const rows = await attempts(messageId)
    expect(rows.map((row) => row.provider_message_id)).to.deep.equal(['second'])
    expect(f.logs.text()).to.include('lease lost')
  })
})
