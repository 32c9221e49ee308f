import { expect } from 'chai'
import { createWorkerMetrics, type WorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFaultySes } from '../src/providers/ses/fake.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { createSmtpConnector } from '../src/providers/smtp/connector.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from '../src/runtime/delivery-pipeline.ts'
import { startFakeSmtp, type FakeSmtp } from './support/fake-smtp.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

const FROM = 'no-reply@sealpost.test'

/** SES's words when an identity of the request is not verified (the sender's, or in the sandbox a recipient's). */
const notVerified = (...identities: string[]) =>
  `Email address is not verified. The following identities failed the check in region US-EAST-1: ${identities.join(', ')}`

/**
 * SES answers `MessageRejected` both when it will not send to a recipient (the sandbox's
 * unverified address) and when our own From identity is not verified (never verified, or its DNS
 * records gone): the second refuses *us* and must hold SES, alarm and fail over instead of
 * dead-lettering every email one by one (docs/delivery.md "Fault table"); the first must stay the
 * message's own fate, or a stranger's address would hold SES down for everyone.
 */
describe('attack: SES refusing our unverified From address (review2)', () => {
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

  const ses = (fromName?: string) => {
    const connector = createSesConnector({
      region: 'us-east-1',
      fromAddress: FROM,
      ...(fromName ? { fromName } : {}),
      endpoint: faulty.url,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    })
    closers.push(() => connector.close())
    return connector
  }
  const refusedBy = async (connector: ReturnType<typeof ses>, destination: string): Promise<DeliveryFailureError> => {
    const message = { messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f', destination, subject: 'Code', text: 'Your code is 493021' }
    const error: unknown = await connector.dispatch(message, AbortSignal.timeout(5_000)).then(
      () => new Error('accepted'),
      (caught: unknown) => caught,
    )
    expect(error).to.be.instanceOf(DeliveryFailureError)
    return error as DeliveryFailureError
  }

  it('holds SES, spends no attempt, alarms and delivers through SMTP when SES names our From address as unverified', async function () {
    this.timeout(20_000)
    faulty.fail(() => ({ status: 400, errorType: 'MessageRejected', message: notVerified(FROM) }))
    const destination = uniqueEmail('unverified-from')
    const { messageId } = await f.harness.enqueue(destination, 600)
    const relay = createSmtpConnector({ url: `smtp://127.0.0.1:${smtp.port}`, fromAddress: FROM, timeoutMs: 2_000, allowPlain: true })
    closers.push(() => relay.close())
    const deps = f.harness.deps({ email: [ses(), relay] })
    pipeline = startDeliveryPipeline(
      { ...deps, metrics, clock: () => new Date(), settings: { ...deps.settings, retrySchedule: [50, 50, 50, 50] } },
      { concurrency: 4, pollMs: 100 },
    )
    await eventually(
      async () => (['published', 'dead_lettered'].includes((await f.rows.message(messageId)).state) ? true : undefined),
      'the message to be settled',
    )

    expect(await f.rows.message(messageId), 'the code goes out through SMTP, never dead-lettered').to.include({ state: 'published' })
    expect((await f.rows.attempts(messageId)).map((row: { provider: string }) => row.provider)).to.deep.equal(['smtp'])
    expect(await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()).to.include({ state: 'down' })
    expect(await metrics.registry.getSingleMetricAsString('sealpost_provider_misconfigured_total')).to.match(/provider="ses"\} 1$/m)
    expect(f.logs.text()).not.to.include(destination)
  })

  it('reads our From address in SES’s list whatever form it takes there (with its display name, in any case)', async () => {
    faulty.fail(() => ({ status: 400, errorType: 'MessageRejected', message: notVerified(`Sealpost <NO-REPLY@sealpost.test>`, FROM) }))
    expect((await refusedBy(ses('Sealpost'), 'person@example.com')).fault).to.equal('provider_misconfigured')
  })

  it('keeps a refusal of a stranger’s address (the sandbox) the message’s own fate: SES is not held for it', async () => {
    for (const [destination, named] of [
      ['stranger@example.com', ['stranger@example.com']],
      // A recipient whose address merely contains ours is still only a recipient.
      ['x.no-reply@sealpost.test', ['x.no-reply@sealpost.test']],
      ['no-reply@sealpost.test.attacker.example', ['no-reply@sealpost.test.attacker.example']],
    ] as const) {
      faulty.fail(() => ({ status: 400, errorType: 'MessageRejected', message: notVerified(...named) }))
      const failure = await refusedBy(ses(), destination)
      expect({ fault: failure.fault, recipientOnly: failure.recipientOnly }, destination).to.deep.equal({
        fault: 'recipient_refused',
        recipientOnly: true,
      })
    }
    // A MessageRejected without the identities list (content SES will not carry) stays the recipient's too.
    faulty.fail(() => ({ status: 400, errorType: 'MessageRejected', message: 'Illegal address' }))
    expect((await refusedBy(ses(), 'person@example.com')).fault).to.equal('recipient_refused')
  })
})
