import { readFile } from 'node:fs/promises'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import { describeError } from '../src/logging/logger.ts'
import { DeliveryFailureError, type OutgoingMessage } from '../src/providers/provider.ts'
import { createSmtpConnector, type SmtpSettings } from '../src/providers/smtp/connector.ts'
import type { Fault } from '../src/providers/faults.ts'
import { classifySmtpError } from '../src/providers/smtp/faults.ts'
import { startFakeSmtp, type FakeSmtp, type FakeSmtpOptions, type SmtpFault, type SmtpStep } from './support/fake-smtp.ts'
import { capturingLogger } from './support/helpers.ts'
import { makeCertificates, type TestCertificates } from './support/tls.ts'

const USER = 'relay-user'
const PASSWORD = 'hunter2-relay-pass'
const DESTINATION = 'person.secret@example.com'
const message: OutgoingMessage = {
  messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f',
  destination: DESTINATION,
  subject: 'Your sign-up code',
  text: 'Your code is 493021',
  html: '<p>Your code is <b>493021</b></p>',
  purpose: 'sign_up',
}

describe('SMTP failure classification (rows of src/providers/faults.ts)', () => {
  const cases: [string, object, boolean, Fault][] = [
    ['a recipient refused with 550', { code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO' }, false, 'recipient_refused'],
    ['a recipient refused with 553', { code: 'EENVELOPE', responseCode: 553, command: 'RCPT TO' }, false, 'recipient_refused'],
    ['554 after the message', { code: 'EMESSAGE', responseCode: 554, command: 'DATA' }, true, 'request_refused'],
    ['550 to our sender', { code: 'EENVELOPE', responseCode: 550, command: 'MAIL FROM' }, false, 'provider_misconfigured'],
    ['554 as the greeting', { code: 'EPROTOCOL', responseCode: 554, command: 'CONN' }, false, 'provider_misconfigured'],
    ['421 without an enhanced code', { code: 'ECONNECTION', responseCode: 421, command: 'CONN' }, true, 'unavailable'],
    [
      '421 4.3.2 (service not available)',
      { code: 'ECONNECTION', responseCode: 421, command: 'CONN', response: '421 4.3.2 not available' },
      false,
      'unavailable',
    ],
    [
      '421 4.7.0 (try again later)',
      { code: 'ECONNECTION', responseCode: 421, command: 'CONN', response: '421 4.7.0 Try again later' },
      false,
      'throttled',
    ],
    ['451 after the message', { code: 'EMESSAGE', responseCode: 451, command: 'DATA' }, true, 'unavailable'],
    ['452 to a recipient', { code: 'EENVELOPE', responseCode: 452, command: 'RCPT TO' }, false, 'throttled'],
    ['535 to AUTH', { code: 'EAUTH', responseCode: 535, command: 'AUTH PLAIN' }, false, 'provider_misconfigured'],
    ['a STARTTLS refusal', { code: 'ETLS', responseCode: 502, command: 'STARTTLS' }, false, 'provider_misconfigured'],
    ['a DNS failure', { code: 'EDNS', command: 'CONN' }, false, 'unavailable'],
    ['a drop before the message', { code: 'ECONNECTION', command: 'CONN' }, false, 'unavailable'],
    ['a drop after the message', { code: 'ECONNECTION', command: 'CONN' }, true, 'indeterminate'],
    ['a silence after the message', { code: 'ETIMEDOUT', command: 'CONN' }, true, 'indeterminate'],
  ]
  for (const [what, error, bodySent, expected] of cases) {
    it(`classifies ${what} as ${expected}`, () => {
      expect(classifySmtpError(error, bodySent).fault).to.equal(expected)
    })
  }

  // The outage hold is fleet-wide: a stranger's addresses must never count as the relay's outage.
  const deferrals: [string, object, boolean][] = [
    ['450 to a recipient', { code: 'EENVELOPE', responseCode: 450, command: 'RCPT TO', response: '450 <a@b.example>: rejected' }, true],
    [
      '450 4.1.2 (domain not found now)',
      { code: 'EENVELOPE', responseCode: 450, command: 'RCPT TO', response: '450 4.1.2 <a@b.example>' },
      true,
    ],
    ['451 4.2.0 (mailbox busy)', { code: 'EENVELOPE', responseCode: 451, command: 'RCPT TO', response: '451 4.2.0 busy' }, true],
    [
      '451 4.3.0 to a recipient (the relay failed)',
      { code: 'EENVELOPE', responseCode: 451, command: 'RCPT TO', response: '451 4.3.0 lookup failure' },
      false,
    ],
    [
      '451 without an enhanced code to a recipient',
      { code: 'EENVELOPE', responseCode: 451, command: 'RCPT TO', response: '451 local error' },
      false,
    ],
    ['452 4.2.2 (mailbox full)', { code: 'EENVELOPE', responseCode: 452, command: 'RCPT TO', response: '452 4.2.2 full' }, true],
    [
      '452 4.5.3 to a recipient (too many recipients: the relay throttles)',
      { code: 'EENVELOPE', responseCode: 452, command: 'RCPT TO', response: '452 4.5.3 too many' },
      false,
    ],
    ['421 to a recipient', { code: 'EENVELOPE', responseCode: 421, command: 'RCPT TO', response: '421 4.1.1 closing' }, false],
    ['450 to our sender', { code: 'EENVELOPE', responseCode: 450, command: 'MAIL FROM', response: '450 4.1.8 sender' }, false],
    ['451 after the message', { code: 'EMESSAGE', responseCode: 451, command: 'DATA', response: '451 4.2.0 later' }, false],
  ]
  for (const [what, error, recipientOnly] of deferrals) {
    it(`counts ${what} ${recipientOnly ? "as the recipient's alone, never the relay's outage" : "as the relay's"}`, () => {
      expect(classifySmtpError(error, false).fault === 'recipient_deferred').to.equal(recipientOnly)
    })
  }
})

describe('SMTP connector against a real SMTP server', () => {
  let certificates: TestCertificates
  let ca: Buffer
  let fake: FakeSmtp | undefined
  let logs: ReturnType<typeof capturingLogger>
  const closers: (() => void)[] = []

  before(async () => {
    certificates = await makeCertificates()
    ca = await readFile(certificates.caCert)
  })
  beforeEach(() => {
    logs = capturingLogger()
  })
  afterEach(async () => {
    closers.splice(0).forEach((close) => close())
    await fake?.close()
    fake = undefined
    // Nothing the connector logged, on any path, may hold the relay's credentials or the address.
    for (const secret of [PASSWORD, USER, DESTINATION]) expect(logs.text()).not.to.include(secret)
  })

  const start = async (options: FakeSmtpOptions = {}) => {
    fake = await startFakeSmtp({ tls: 'starttls', certificates, auth: { user: USER, pass: PASSWORD }, ...options })
    return fake
  }
  const connector = (settings: Partial<SmtpSettings> & { scheme?: 'smtp' | 'smtps'; password?: string } = {}) => {
    const { scheme = 'smtp', password = PASSWORD, ...rest } = settings
    const smtp = createSmtpConnector({
      url: `${scheme}://${USER}:${encodeURIComponent(password)}@127.0.0.1:${fake!.port}`,
      fromAddress: 'no-reply@sealpost.test',
      fromName: 'Sealpost',
      timeoutMs: 2_000,
      concurrency: 2,
      tls: { ca },
      ...rest,
    })
    closers.push(() => smtp.close())
    return smtp
  }
  /** The DeliveryFailureError a dispatch ends in, checked clean: it is logged (describeError) and may be shown. */
  const failure = async (promise: Promise<unknown>) => {
    try {
      await promise
    } catch (error) {
      const { message: text, stack } = error as Error
      for (const shown of [text, stack ?? '', JSON.stringify(describeError(error))])
        for (const secret of [PASSWORD, USER, DESTINATION]) expect(shown).not.to.include(secret)
      expect(error).to.be.instanceOf(DeliveryFailureError)
      const { failureClass, providerCode } = error as DeliveryFailureError
      return { failureClass, providerCode }
    }
    throw new Error('expected the dispatch to fail')
  }

  it('delivers over STARTTLS with AUTH: subject, text, the HTML alternative and the From display name arrive', async () => {
    await start()
    const result = await connector().dispatch(message, AbortSignal.timeout(5_000))
    const mail = fake!.accepted()[0]!
    expect(mail).to.include({ from: 'no-reply@sealpost.test', secure: true, user: USER })
    expect(mail.to).to.deep.equal([DESTINATION])
    expect(mail.raw).to.match(/^From: "?Sealpost"? <no-reply@sealpost\.test>$/m)
    expect(mail.raw).to.match(/^Subject: Your sign-up code$/m)
    expect(mail.raw).to.include('multipart/alternative')
    expect(mail.raw).to.include('Your code is 493021').and.to.include('<p>Your code is <b>493021</b></p>')
    expect(mail.raw).to.include(`Message-ID: <${result.providerMessageId}>`)
  })

  it('delivers over implicit TLS (smtps://)', async () => {
    await start({ tls: 'implicit' })
    await connector({ scheme: 'smtps' }).dispatch(message, AbortSignal.timeout(5_000))
    expect(fake!.accepted().map((mail) => mail.secure)).to.deep.equal([true])
  })

  it('never sends in clear to a server without STARTTLS: UNAVAILABLE, no AUTH, no message', async () => {
    await start({ tls: 'none' })
    expect(await failure(connector().dispatch(message, AbortSignal.timeout(5_000)))).to.deep.equal({
      failureClass: 'UNAVAILABLE',
      providerCode: 'ETLS',
    })
    expect(fake!.authAttempts).to.deep.equal([])
    expect(fake!.received).to.deep.equal([])
  })

  it('sends plain only when told it may (a loopback relay in development)', async () => {
    await start({ tls: 'none' })
    await connector({ allowPlain: true }).dispatch(message, AbortSignal.timeout(5_000))
    expect(fake!.accepted().map((mail) => mail.secure)).to.deep.equal([false])
  })

  it('verifies the certificate: a relay whose CA is not trusted is UNAVAILABLE and gets nothing', async () => {
    await start({ tls: 'implicit' })
    const failed = await failure(connector({ scheme: 'smtps', tls: {} }).dispatch(message, AbortSignal.timeout(5_000)))
    expect(failed.failureClass).to.equal('UNAVAILABLE')
    expect(fake!.received).to.deep.equal([])
  })

  it('refused credentials are the provider misconfigured (smtp_auth), never the person, and carry no password', async () => {
    await start()
    const smtp = connector({ password: 'wrong-password' })
    for (let i = 0; i < 2; i++) {
      const refused = await smtp.dispatch(message, AbortSignal.timeout(5_000)).catch((error: unknown) => error as DeliveryFailureError)
      expect(refused).to.be.instanceOf(DeliveryFailureError)
      expect(refused).to.include({ failureClass: 'UNAVAILABLE', providerCode: 'smtp_auth', effect: 'provider_misconfigured' })
      expect(JSON.stringify(describeError(refused))).not.to.include('wrong-password')
    }
    expect(logs.text()).not.to.include('wrong-password')
  })

  const faults: [SmtpStep, SmtpFault, string, string][] = [
    ['connect', { kind: 'refuse', code: 421 }, 'UNAVAILABLE', 'smtp_421'],
    ['connect', { kind: 'refuse', code: 421, text: '4.7.0 Try again later' }, 'THROTTLED', 'smtp_421'],
    ['connect', { kind: 'drop' }, 'UNAVAILABLE', 'ECONNECTION'],
    ['mail', { kind: 'refuse', code: 550, text: '5.1.8 Sender address rejected' }, 'UNAVAILABLE', 'smtp_550'],
    ['rcpt', { kind: 'refuse', code: 550 }, 'REJECTED', 'smtp_550'],
    ['rcpt', { kind: 'refuse', code: 551 }, 'REJECTED', 'smtp_551'],
    ['rcpt', { kind: 'refuse', code: 553 }, 'REJECTED', 'smtp_553'],
    ['rcpt', { kind: 'refuse', code: 450 }, 'UNAVAILABLE', 'smtp_450'],
    ['rcpt', { kind: 'refuse', code: 451 }, 'UNAVAILABLE', 'smtp_451'],
    ['rcpt', { kind: 'refuse', code: 452 }, 'THROTTLED', 'smtp_452'],
    ['after-data', { kind: 'refuse', code: 554 }, 'REJECTED', 'smtp_554'],
    ['after-data', { kind: 'refuse', code: 451 }, 'UNAVAILABLE', 'smtp_451'],
    ['after-data', { kind: 'refuse', code: 452 }, 'THROTTLED', 'smtp_452'],
    ['after-data', { kind: 'drop' }, 'INDETERMINATE', 'ECONNECTION'],
  ]
  for (const [step, fault, failureClass, providerCode] of faults) {
    const what =
      fault.kind === 'refuse' ? `answers ${fault.code}${fault.text ? ` ${fault.text.split(' ')[0]}` : ''}` : 'drops the connection'
    it(`a server that ${what} at ${step} is ${failureClass} (${providerCode})`, async () => {
      await start()
      fake!.failAt(step, fault)
      expect(await failure(connector().dispatch(message, AbortSignal.timeout(5_000)))).to.deep.equal({ failureClass, providerCode })
    })
  }

  it('keeps using the pool after a refused recipient, and opens no more connections than its concurrency', async () => {
    await start()
    const smtp = connector({ concurrency: 2 })
    fake!.failAt('rcpt', { kind: 'refuse', code: 550 })
    expect((await failure(smtp.dispatch(message, AbortSignal.timeout(5_000)))).failureClass).to.equal('REJECTED')
    fake!.resetFaults()
    await Promise.all(Array.from({ length: 6 }, () => smtp.dispatch(message, AbortSignal.timeout(5_000))))
    expect(fake!.accepted()).to.have.length(6)
    expect(fake!.sessions()).to.be.at.most(2)
  })

  it('after a timeout it closed, and after a pooled connection sat idle past the socket timeout, the next send goes out', async () => {
    await start()
    const smtp = connector({ timeoutMs: 150 })
    fake!.failAt('after-data', { kind: 'hang' })
    expect((await failure(smtp.dispatch(message, AbortSignal.timeout(5_000)))).failureClass).to.equal('INDETERMINATE')
    fake!.resetFaults()
    await smtp.dispatch(message, AbortSignal.timeout(5_000))
    await new Promise((resolve) => setTimeout(resolve, 300))
    await smtp.dispatch(message, AbortSignal.timeout(5_000))
    expect(fake!.received.map((mail) => mail.answer)).to.deep.equal(['hung', 'accepted', 'accepted'])
  })

  it('a connection refused (nothing listening) is UNAVAILABLE', async () => {
    const closed = net.createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    fake = await startFakeSmtp({ tls: 'none' })
    const smtp = createSmtpConnector({
      url: `smtp://${USER}:${PASSWORD}@127.0.0.1:${port}`,
      fromAddress: 'no-reply@sealpost.test',
      timeoutMs: 2_000,
    })
    closers.push(() => smtp.close())
    expect((await failure(smtp.dispatch(message, AbortSignal.timeout(5_000)))).failureClass).to.equal('UNAVAILABLE')
  })

  it('a send timeout while the server hangs after the message is INDETERMINATE: it may have been accepted', async () => {
    await start()
    fake!.failAt('after-data', { kind: 'hang' })
    expect(await failure(connector({ timeoutMs: 5_000 }).dispatch(message, AbortSignal.timeout(300)))).to.deep.equal({
      failureClass: 'INDETERMINATE',
      providerCode: 'Timeout',
    })
    expect(fake!.received.map((mail) => mail.answer)).to.deep.equal(['hung'])
  })

  it('the socket timeout while the server hangs after the message is INDETERMINATE too', async () => {
    await start()
    fake!.failAt('after-data', { kind: 'hang' })
    expect(await failure(connector({ timeoutMs: 300 }).dispatch(message, AbortSignal.timeout(5_000)))).to.deep.equal({
      failureClass: 'INDETERMINATE',
      providerCode: 'ETIMEDOUT',
    })
  })

  it('a send timeout while the server hangs before its greeting or at a recipient is UNAVAILABLE: nothing was sent', async () => {
    await start()
    for (const step of ['connect', 'rcpt'] as const) {
      fake!.resetFaults()
      fake!.failAt(step, { kind: 'hang' })
      expect(await failure(connector({ timeoutMs: 5_000 }).dispatch(message, AbortSignal.timeout(300)))).to.deep.equal({
        failureClass: 'UNAVAILABLE',
        providerCode: 'Timeout',
      })
    }
    expect(fake!.received).to.deep.equal([])
  })
})
