import { expect } from 'chai'
import { eventually, uniquePhone } from './support/helpers.ts'
import { outboxRows } from './support/outbox-harness.ts'
import { useProcessFixture } from './support/process-fixture.ts'

const LEASE_SECONDS = 9
const SEND_TIMEOUT_MS = 2_000

describe('a worker killed mid-delivery', () => {
  const f = useProcessFixture({ harness: true, leaseSeconds: LEASE_SECONDS })
  const rows = outboxRows(() => f.db)

  it('is redelivered by another worker after its lease: published, the duplicate counted, nothing lost', async function () {
    this.timeout(90_000)
    // The provider takes the first request (the person gets the code) but the answer never comes back.
    f.wasender.behave((call) => (call === 1 ? { kind: 'accept-then-hang' } : { kind: 'accept' }))
    const phone = uniquePhone()
    const { messageId } = await f.harness.enqueue(phone)
    const settings = { LEASE_SECONDS: String(LEASE_SECONDS), SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS) }
    const first = f.worker(settings)
    await eventually(async () => (f.wasender.requests.length === 1 ? true : undefined), 'the first worker to reach the provider', 30_000)
    first.child.kill('SIGKILL')
    await first.exited
    expect(await rows.message(messageId)).to.include({ state: 'leased', attempt_count: 0 })

    const second = f.worker(settings)
    try {
      const published = await eventually(
        async () => {
          const message = await rows.message(messageId)
          return message.state === 'published' ? message : undefined
        },
        'the second worker to redeliver after the lease',
        60_000,
      )
      expect(published.attempt_count).to.equal(1)
    } finally {
      second.child.kill('SIGTERM')
      await second.exited
    }
    const accepted = f.wasender.accepted().filter((request) => request.to === phone)
    expect(accepted, 'sent twice: at-least-once, a duplicate rather than a loss').to.have.length(2)
    expect((await rows.attempts(messageId)).map((row) => [row.attempt_no, row.outcome])).to.deep.equal([[1, 'published']])
    expect(await rows.ciphertexts(messageId)).to.equal(0)
  })
})
