import { expect } from 'chai'
import { deliverBatch, deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { createWasenderConnector } from '../src/providers/wasender/connector.ts'
import { QUEUES, type DeliveryJobData, type FailureClass } from '../src/outbox/constants.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { uniqueEmail, uniquePhone } from './support/helpers.ts'
import { SCHEDULE, useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('delivery outcomes by failure class and attempt', () => {
  const f = useOutboxFixture()
  const rows = f.rows

  /** Fails attempts 1…n-1 as UNAVAILABLE (advancing the clock by the schedule), then runs attempt n. */
  async function runAttempt(n: number, last: Error) {
    const { messageId } = await f.harness.enqueue(uniqueEmail())
    const provider = scriptedProvider((call) => (call < n ? new DeliveryFailureError('UNAVAILABLE', 'HTTP503') : last))
    for (let attempt = 1; attempt < n; attempt++) {
      await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
      f.now = new Date(f.now.getTime() + SCHEDULE[attempt - 1]!)
    }
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    return messageId
  }

  const classes: FailureClass[] = ['REJECTED', 'THROTTLED', 'UNAVAILABLE', 'INDETERMINATE', 'unexpected_worker_error']
  for (const failureClass of classes) {
    for (let n = 1; n <= 5; n++) {
      const retried = failureClass !== 'REJECTED' && n < 5
      const expectation = retried
        ? `retries after ${SCHEDULE[n - 1]! / 1000} s`
        : `dead-letters ${failureClass === 'REJECTED' ? 'provider_rejected' : 'retries_exhausted'}`
      it(`${failureClass} on attempt ${n} ${expectation}`, async () => {
        const error = failureClass === 'unexpected_worker_error' ? new TypeError('boom') : new DeliveryFailureError(failureClass, 'X')
        const messageId = await runAttempt(n, error)
        const attempt = (await rows.attempts(messageId))[n - 1]
        expect(attempt).to.include({ attempt_no: n, outcome: retried ? 'retryable_error' : 'failed', failure_class: failureClass })
        const message = await rows.message(messageId)
        const next = await rows.queuedJob(messageId)
        if (retried) {
          expect(message).to.include({ state: 'pending', attempt_count: n })
          expect(await rows.deadLetter(messageId)).to.equal(undefined)
          expect(next.start_after.getTime()).to.be.closeTo(f.now.getTime() + SCHEDULE[n - 1]!, 1_000)
          expect(await rows.ciphertexts(messageId)).to.equal(1)
        } else {
          expect(message).to.include({ state: 'dead_lettered', attempt_count: n })
          expect(await rows.deadLetter(messageId)).to.include({
            reason: failureClass === 'REJECTED' ? 'provider_rejected' : 'retries_exhausted',
            last_failure_class: failureClass,
          })
          expect(next).to.equal(undefined)
          expect(await rows.ciphertexts(messageId)).to.equal(0)
        }
      })
    }
  }

  for (const [retryAfterSeconds, expectedSeconds] of [
    [120, 120],
    [1, 5],
  ] as const) {
    it(`waits ${expectedSeconds} s after a first-attempt THROTTLED with Retry-After ${retryAfterSeconds} s`, async () => {
      const messageId = await runAttempt(
        1,
        new DeliveryFailureError('THROTTLED', 'HTTP429', new Date(f.now.getTime() + retryAfterSeconds * 1000)),
      )
      const next = await rows.queuedJob(messageId)
      expect(next.start_after.getTime()).to.be.closeTo(f.now.getTime() + expectedSeconds * 1000, 1_000)
    })
  }

  describe('through the Wasender connector', () => {
    let fake: Awaited<ReturnType<typeof startFakeWasender>>
    let connector: ReturnType<typeof createWasenderConnector>
    beforeEach(async () => {
      fake = await startFakeWasender('key')
      connector = createWasenderConnector({ apiUrl: fake.url, apiKey: 'key', clock: () => f.now })
    })
    afterEach(async () => {
      connector.close()
      await fake.stop()
    })

    it('publishes on attempt 2 after a 429, keeping the ciphertext exactly until the publish', async () => {
      fake.behave((call) => (call === 1 ? { kind: 'status', status: 429 } : { kind: 'accept' }))
      const { messageId } = await f.harness.enqueue(uniquePhone())
      await deliverOne(f.harness.deps({ whatsapp: connector }), await f.harness.nextJob())
      expect(await rows.message(messageId)).to.include({ state: 'pending', attempt_count: 1 })
      expect(await rows.ciphertexts(messageId)).to.equal(1)

      f.now = new Date(f.now.getTime() + SCHEDULE[0]!)
      await deliverOne(f.harness.deps({ whatsapp: connector }), await f.harness.nextJob())
      expect(await rows.message(messageId)).to.include({ state: 'published', attempt_count: 2 })
      expect(await rows.ciphertexts(messageId)).to.equal(0)
      expect(
        (await rows.attempts(messageId)).map((row) => [row.attempt_no, row.outcome, row.failure_class, row.provider_message_id]),
      ).to.deep.equal([
        [1, 'retryable_error', 'THROTTLED', null],
        [2, 'published', null, '1'],
      ])
      expect(fake.accepted()).to.have.length(1)
    })

    it('dead-letters challenge_expired at once when Retry-After, capped at 5 minutes, lands past a 4-minute challenge', async () => {
      fake.behave(() => ({ kind: 'status', status: 429, headers: { 'retry-after': String(20 * 60) } }))
      const { messageId } = await f.harness.enqueue(uniquePhone(), 240)
      await deliverOne(f.harness.deps({ whatsapp: connector }), await f.harness.nextJob())
      expect(await rows.message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 1 })
      expect(await rows.deadLetter(messageId)).to.include({ reason: 'challenge_expired', last_failure_class: 'THROTTLED' })
      expect(await rows.queuedJob(messageId)).to.equal(undefined)
    })
  })

  it('keeps a hostile exception message (code, destination, bearer token) out of the logs', async () => {
    const phone = uniquePhone()
    const { messageId } = await f.harness.enqueue(phone)
    let code = ''
    const hostile: Provider = {
      id: 'wasender',
      channel: 'whatsapp',
      async dispatch(message) {
        code = /\d{6}/.exec(message.text)![0]
        throw Object.assign(new Error(`refused ${code} for ${message.destination} with Authorization: Bearer sk_live_hostile`), {
          code: 'EHOSTILE',
        })
      },
    }
    await deliverOne(f.harness.deps({ whatsapp: hostile }), await f.harness.nextJob())
    expect(await rows.message(messageId)).to.include({ state: 'pending', attempt_count: 1 })
    const logged = f.logs.text()
    expect(logged).to.include('"errorCode":"EHOSTILE"').and.to.include(messageId)
    for (const secret of [code, phone, 'sk_live_hostile', 'Bearer']) expect(logged, secret).not.to.include(secret)
  })

  it('dead-letters one undecryptable message of a batch without touching the others', async () => {
    const ids = []
    for (let i = 0; i < 3; i++) ids.push((await f.harness.enqueue(uniqueEmail())).messageId)
    await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: ids[1] }).update({ envelope: 'v1.AAAA.AAAA.AAAA.AAAA' })
    const jobs = await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 3 })
    expect(jobs).to.have.length(3)
    const provider = scriptedProvider((call) => ({ providerMessageId: `ok-${call}` }))
    await deliverBatch(f.harness.deps({ email: provider }), jobs)
    expect((await rows.message(ids[0]!)).state).to.equal('published')
    expect((await rows.message(ids[2]!)).state).to.equal('published')
    expect(await rows.deadLetter(ids[1]!)).to.include({ reason: 'decryption_failed' })
    expect(provider.calls).to.have.length(2)
  })
})
