import { expect } from 'chai'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { createSmtpConnector } from '../src/providers/smtp/connector.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from '../src/runtime/delivery-pipeline.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { startFakeSmtp, type FakeSmtp } from './support/fake-smtp.ts'
import { startFaultySes } from '../src/providers/ses/fake.ts'
import { DEFAULT_HEALTH_POLICY } from '../src/outbox/provider-health.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

/**
 * Failover and the outage hold through the worker's own pipeline and the real parts: the SES
 * client against the SES emulator behind a proxy that answers 503 on demand, and nodemailer against
 * a real SMTP server (EMAIL_PROVIDERS=ses,smtp).
 */
describe('email failover, SES to SMTP, through the delivery pipeline', () => {
  const f = useOutboxFixture()
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let faulty: Awaited<ReturnType<typeof startFaultySes>>
  let smtp: FakeSmtp
  let pipeline: DeliveryPipeline | undefined
  const closers: (() => void)[] = []

  beforeEach(async () => {
    emulator = await startSesEmulator(0)
    faulty = await startFaultySes(emulator.url)
    smtp = await startFakeSmtp()
  })
  afterEach(async () => {
    await pipeline?.stop()
    pipeline = undefined
    for (const close of closers.splice(0)) close()
    await Promise.all([smtp.close(), faulty.stop(), emulator.stop()])
  })

  const start = () => {
    const ses = createSesConnector({
      region: 'us-east-1',
      fromAddress: 'no-reply@sealpost.test',
      endpoint: faulty.url,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    })
    const relay = createSmtpConnector({
      url: `smtp://127.0.0.1:${smtp.port}`,
      fromAddress: 'no-reply@sealpost.test',
      timeoutMs: 2_000,
      allowPlain: true,
    })
    closers.push(
      () => ses.close(),
      () => relay.close(),
    )
    const deps = f.harness.deps({ email: [ses, relay] })
    // Real time, and retries after 50 ms instead of 5 s: the pipeline runs as in production, only faster.
    pipeline = startDeliveryPipeline(
      { ...deps, clock: () => new Date(), settings: { ...deps.settings, retrySchedule: [50, 50, 50, 50] } },
      { concurrency: 4, pollMs: 100 },
    )
  }
  const providersOf = async (messageId: string) =>
    (await f.rows.attempts(messageId)).map((row: { provider: string; outcome: string }) => `${row.provider}:${row.outcome}`)
  const published = (ids: string[]) => async () =>
    (await f.db.owner('outbox.security_outbox_messages').whereIn('id', ids).where({ state: 'published' })).length === ids.length
      ? true
      : undefined

  it('sends every code through SMTP while SES answers 503, holds SES down once its window fails, and goes back to SES once a probe succeeds', async function () {
    this.timeout(30_000)
    faulty.fail(() => ({ status: 503, errorType: 'ServiceUnavailableException' }))
    const first = (await f.harness.enqueue(uniqueEmail('first'), 600)).messageId
    start()
    await eventually(published([first]), 'the first code to go out through SMTP')
    expect(await providersOf(first), 'failover mid-retry').to.deep.equal(['ses:retryable_error', 'smtp:published'])
    expect(await f.rows.ciphertexts(first), 'the secret deleted at publish').to.equal(0)

    // Enough codes for SES's window to reach its minimum of calls, every one failing.
    const more: string[] = []
    for (let i = 0; i < DEFAULT_HEALTH_POLICY.minimumCalls + 2; i++)
      more.push((await f.harness.enqueue(uniqueEmail(`more-${i}`), 600)).messageId)
    await eventually(published(more), 'more codes through SMTP')
    const state = await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()
    expect(state).to.include({ state: 'down' })
    const sesCalls = faulty.calls()
    expect(sesCalls, 'at most one SES call per message: each went on to SMTP').to.be.within(
      DEFAULT_HEALTH_POLICY.minimumCalls,
      1 + more.length,
    )
    const straight: string[] = []
    for (let i = 0; i < 3; i++) straight.push((await f.harness.enqueue(uniqueEmail(`held-${i}`), 600)).messageId)
    await eventually(published(straight), 'codes asked for during the hold')
    expect(faulty.calls(), 'no SES call for a message while it is held down').to.equal(sesCalls)
    for (const id of straight) expect(await providersOf(id)).to.deep.equal(['smtp:published'])
    expect(smtp.accepted()).to.have.length(1 + more.length + straight.length)

    // SES is back; the operator (or the probe interval) makes the next probe due.
    faulty.fail(() => 'forward')
    await f.db
      .owner('outbox.provider_states')
      .where({ provider: 'ses' })
      .update({ next_probe_at: new Date(Date.now() - 1_000) })
    const probe = (await f.harness.enqueue(uniqueEmail('probe'), 600)).messageId
    await eventually(published([probe]), 'the probe to go out through SES')
    expect(await providersOf(probe)).to.deep.equal(['ses:published'])
    expect(await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()).to.include({ state: 'up', failure_streak: 0 })
    expect(f.logs.text()).to.include('provider is back')
    const after = (await f.harness.enqueue(uniqueEmail('after'), 600)).messageId
    await eventually(published([after]), 'the next code through SES again')
    expect(await providersOf(after)).to.deep.equal(['ses:published'])
  })

  it('never fails a recipient the relay refuses over to another provider', async function () {
    this.timeout(20_000)
    faulty.fail(() => ({ status: 503, errorType: 'ServiceUnavailableException' }))
    smtp.failAt('rcpt', { kind: 'refuse', code: 550 })
    const id = (await f.harness.enqueue(uniqueEmail('refused'), 600)).messageId
    start()
    await eventually(
      async () => ((await f.rows.message(id)).state === 'dead_lettered' ? true : undefined),
      'the refused recipient to be dead-lettered',
    )
    expect(await providersOf(id)).to.deep.equal(['ses:retryable_error', 'smtp:failed'])
    expect(await f.rows.deadLetter(id)).to.include({ reason: 'provider_rejected', last_failure_class: 'REJECTED' })
    expect(faulty.calls(), 'SES never asked again after the rejection').to.equal(1)
  })
})
