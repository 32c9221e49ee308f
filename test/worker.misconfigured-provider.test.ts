import { expect } from 'chai'
import { createWorkerMetrics, type WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { releaseHeldJobsTx } from '../src/outbox/pgboss-jobs-sql.ts'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFaultySes, type SesFault } from '../src/providers/ses/fake.ts'
import { createSmtpConnector } from '../src/providers/smtp/connector.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from '../src/runtime/delivery-pipeline.ts'
import { startFakeSmtp, type FakeSmtp } from './support/fake-smtp.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

/**
 * A provider that refuses *us* (the fault table's `provider_misconfigured`) is held, alarmed and
 * failed over, and never costs the person an attempt: proven on SES, which used to spend attempts
 * on a 403 and dead-letter every email on a mistyped SES_CONFIGURATION_SET (NotFoundException).
 * The real SES client against the emulator behind the faulty endpoint, a real SMTP server, the
 * worker's own pipeline.
 */
describe('a misconfigured provider, through the delivery pipeline', () => {
  const f = useOutboxFixture()
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let faulty: Awaited<ReturnType<typeof startFaultySes>>
  let smtp: FakeSmtp
  let pipeline: DeliveryPipeline | undefined
  let metrics: WorkerMetrics
  const closers: (() => void)[] = []

  beforeEach(async () => {
    emulator = await startSesEmulator(0)
    faulty = await startFaultySes(emulator.url)
    smtp = await startFakeSmtp()
    metrics = createWorkerMetrics()
  })
  afterEach(async () => {
    await pipeline?.stop()
    pipeline = undefined
    for (const close of closers.splice(0)) close()
    await Promise.all([smtp.close(), faulty.stop(), emulator.stop()])
  })

  const start = (withSmtp: boolean) => {
    const ses = createSesConnector({
      region: 'us-east-1',
      fromAddress: 'no-reply@sealpost.test',
      configurationSet: 'sealpost-evnets',
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
    const deps = f.harness.deps({ email: withSmtp ? [ses, relay] : [ses] })
    pipeline = startDeliveryPipeline(
      { ...deps, metrics, clock: () => new Date(), settings: { ...deps.settings, retrySchedule: [50, 50, 50, 50] } },
      { concurrency: 4, pollMs: 100 },
    )
  }
  const providersOf = async (messageId: string) =>
    (await f.rows.attempts(messageId)).map((row: { provider: string; outcome: string }) => `${row.provider}:${row.outcome}`)
  const published = (id: string) => async () => ((await f.rows.message(id)).state === 'published' ? true : undefined)
  const misconfigurationLines = () =>
    f.logs
      .text()
      .split('\n')
      .filter((line) => line.includes('MISCONFIGURATION'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
  const counted = async () => (await metrics.registry.getSingleMetricAsString('sealpost_provider_misconfigured_total')).trim()

  const refusals: [string, Extract<SesFault, { status: number }>][] = [
    ['404 NotFoundException (a mistyped SES_CONFIGURATION_SET)', { status: 404, errorType: 'NotFoundException' }],
    ['403 AccessDeniedException (credentials without ses:SendEmail)', { status: 403, errorType: 'AccessDeniedException' }],
  ]
  for (const [what, refusal] of refusals)
    it(`SES answering ${what}: no attempt spent, SES held down, MISCONFIGURATION logged and counted, the code delivered through SMTP`, async function () {
      this.timeout(20_000)
      faulty.fail(() => refusal)
      const destination = uniqueEmail('misconfigured')
      const { messageId } = await f.harness.enqueue(destination, 600)
      start(true)
      await eventually(published(messageId), 'the code to go out through SMTP')

      expect(await providersOf(messageId), 'SES’s refusal of us is no attempt of the person’s').to.deep.equal(['smtp:published'])
      expect(await f.rows.message(messageId)).to.include({ attempt_count: 1 })
      expect(smtp.accepted().map((mail) => mail.to)).to.deep.equal([[destination]])
      expect(await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()).to.include({ state: 'down' })
      const [line] = misconfigurationLines()
      expect(line).to.include({ provider: 'ses', channel: 'email', messageId, providerCode: refusal.errorType })
      expect(await counted()).to.match(/^sealpost_provider_misconfigured_total\{provider="ses"\} 1$/m)
      expect(faulty.calls(), 'SES asked once, then skipped while held').to.equal(1)
      expect(f.logs.text()).not.to.include(destination)
    })

  it('with no other email provider, the code waits without spending an attempt and goes out once SES is fixed', async function () {
    this.timeout(20_000)
    faulty.fail(() => ({ status: 404, errorType: 'NotFoundException' }))
    const { messageId } = await f.harness.enqueue(uniqueEmail('waits'), 600)
    start(false)
    await eventually(
      async () => ((await f.db.owner('outbox.provider_states').where({ provider: 'ses', state: 'down' }).first()) ? true : undefined),
      'SES to be held down',
    )
    // Held, not spent: put back until the probe, never an attempt. Waited for, so the call back below
    // meets it put back: one still leased, or pending for a claim due now, is put back after the call
    // back ran, up to the longest probe interval away, and the call back would miss it.
    const held = await eventually(async () => {
      const row = await f.rows.message(messageId)
      return row.state === 'pending' && new Date(row.available_at).getTime() > Date.now() + 1_000 ? row : undefined
    }, 'the held code to be put back until the probe')
    expect(held.attempt_count).to.equal(0)
    expect(await f.rows.attempts(messageId)).to.deep.equal([])
    expect(await f.rows.ciphertexts(messageId)).to.equal(1)

    // The operator fixes the configuration set; the next probe is made due (as the console's lift does).
    faulty.fail(() => 'forward')
    await f.db
      .owner('outbox.provider_states')
      .where({ provider: 'ses' })
      .update({ next_probe_at: new Date(Date.now() - 1_000) })
    // A held message comes back at a random moment up to the longest probe interval after the probe
    // falls due; call it back now, with the statement a lifted hold runs, instead of waiting for it.
    await f.db.owner.transaction((trx) => releaseHeldJobsTx(trx, 'email', new Date()))
    await eventually(published(messageId), 'the held code to go out through SES')
    expect(await providersOf(messageId)).to.deep.equal(['ses:published'])
    expect(await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()).to.include({ state: 'up' })
  })
})
