import { expect } from 'chai'
import { deliverOne } from './support/run-once.ts'
import { createSmtpConnector } from '../src/providers/smtp/connector.ts'
import { DEFAULT_HEALTH_POLICY } from '../src/outbox/provider-health.ts'
import { uniqueEmail } from './support/helpers.ts'
import { startFakeSmtp, type FakeSmtp } from './support/fake-smtp.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

/**
 * Attacks on the outage hold: the hold is fleet-wide, so whatever a stranger can make a
 * provider answer must never count as the provider's outage unless it is one.
 */
describe('attacks on the outage hold', () => {
  const f = useOutboxFixture()
  let smtp: FakeSmtp
  const closers: (() => void)[] = []

  beforeEach(async () => {
    smtp = await startFakeSmtp()
  })
  afterEach(async () => {
    for (const close of closers.splice(0)) close()
    await smtp.close()
  })

  const relay = () => {
    const connector = createSmtpConnector({
      url: `smtp://127.0.0.1:${smtp.port}`,
      fromAddress: 'no-reply@sealpost.test',
      timeoutMs: 2_000,
      allowPlain: true,
    })
    closers.push(() => connector.close())
    return connector
  }
  const deps = () => {
    const built = f.harness.deps({ email: [relay()] })
    return { ...built, settings: { ...built.settings, providerHealth: { ...DEFAULT_HEALTH_POLICY, random: () => 1 } } }
  }

  it("a stranger's addresses that the relay answers 4xx at RCPT TO (a domain it cannot verify now) hold the relay down for everyone", async () => {
    // The relay verifies recipients (Postfix reject_unknown_recipient_domain, reject_unverified_recipient):
    // a domain whose name servers never answer gets 450 4.1.2 at RCPT TO, for that recipient only.
    smtp.failAt('rcpt', { kind: 'refuse', code: 450 })
    const strangers = []
    // As many as the breaker's minimum number of calls: every one of them failing would hold a provider.
    for (let i = 0; i < DEFAULT_HEALTH_POLICY.minimumCalls; i++)
      strangers.push((await f.harness.enqueue(`stranger-${i}@unresolvable.example`, 600)).messageId)
    const delivery = deps()
    for (let i = 0; i < strangers.length; i++) await deliverOne(delivery, await f.harness.nextJob())
    for (const id of strangers) expect(await f.rows.message(id), 'each stranger message retries').to.include({ attempt_count: 1 })

    // Every other recipient is accepted as always: the owner's code must go out now.
    smtp.resetFaults()
    const owner = (await f.harness.enqueue(uniqueEmail('owner'), 600)).messageId
    const job = await f.harness.nextDueJob(f)
    expect(job?.data.messageId, 'due first: the strangers retry later').to.equal(owner)
    await deliverOne(delivery, job!)
    expect(await f.rows.message(owner), "the owner's code sent, not held").to.include({ state: 'published', attempt_count: 1 })
    const smtpState = await f.db.owner('outbox.provider_states').where({ provider: 'smtp' }).first()
    expect(smtpState?.state ?? 'up', "the strangers' deferrals are no failures of the relay's").to.equal('up')
  })
})
