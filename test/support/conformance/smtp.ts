import { readFile } from 'node:fs/promises'
import { createSmtpConnector } from '../../../src/providers/smtp/connector.ts'
import type { FaultCaseId } from '../../../src/providers/faults.ts'
import { closedPort } from '../dead-ends.ts'
import { startFakeSmtp, type SmtpFault, type SmtpStep } from '../fake-smtp.ts'
import { makeCertificates } from '../tls.ts'
import { EMAIL, SEND_MS, TIMEOUT_MS, type Arranged, type ConformanceFixture } from './fixture.ts'

const USER = 'relay-user'
const PASSWORD = 'relay-password'

/** Each case as the relay's natural answer: the step of the dialogue and the reply there (src/providers/smtp/faults.ts). */
const ANSWERS: Record<Exclude<FaultCaseId, 'not_on_channel' | 'unauthorized' | 'refused'>, [SmtpStep, SmtpFault, number?]> = {
  malformed: ['after-data', { kind: 'refuse', code: 554, text: '5.6.0 Message content rejected' }],
  forbidden: ['mail', { kind: 'refuse', code: 530, text: '5.7.0 Authentication required' }],
  not_found: ['mail', { kind: 'refuse', code: 550, text: '5.1.8 Sender address rejected: domain not found' }],
  too_large: ['after-data', { kind: 'refuse', code: 552, text: '5.3.4 Message size exceeds fixed limit' }],
  throttled: ['connect', { kind: 'refuse', code: 421, text: '4.7.0 Try again later, closing connection' }],
  throttled_seconds: ['rcpt', { kind: 'refuse', code: 452, text: '4.5.3 Too many recipients' }],
  throttled_date: ['rcpt', { kind: 'refuse', code: 452, text: '4.5.3 Too many recipients' }],
  server_error: ['after-data', { kind: 'refuse', code: 451, text: '4.3.0 Local error in processing' }],
  bad_gateway: ['connect', { kind: 'refuse', code: 421, text: '4.3.2 Service not available' }],
  unavailable: ['mail', { kind: 'refuse', code: 450, text: '4.3.2 System not accepting network messages' }],
  gateway_timeout: ['after-data', { kind: 'drop' }],
  timeout_before: ['connect', { kind: 'hang' }, TIMEOUT_MS],
  timeout_after: ['after-data', { kind: 'hang' }, TIMEOUT_MS],
  reset: ['after-data', { kind: 'drop' }],
  recipient_refused: ['rcpt', { kind: 'refuse', code: 550, text: '5.1.1 User unknown' }],
  unreadable_success: ['after-data', { kind: 'garble' }],
}

/** SMTP through nodemailer's pool, against a real SMTP server (STARTTLS, AUTH) that fails on demand. */
export const smtpFixture: ConformanceFixture = {
  id: 'smtp',
  hints: false,
  async start() {
    const certificates = await makeCertificates()
    const ca = await readFile(certificates.caCert)
    const fake = await startFakeSmtp({ tls: 'starttls', certificates, auth: { user: USER, pass: PASSWORD } })
    const connectors: { close(): void }[] = []
    const connector = (port = fake.port, password = PASSWORD) => {
      const smtp = createSmtpConnector({
        url: `smtp://${USER}:${password}@127.0.0.1:${port}`,
        fromAddress: 'no-reply@sealpost.test',
        timeoutMs: SEND_MS,
        tls: { ca },
      })
      connectors.push(smtp)
      return smtp
    }
    return {
      async arrange(id: FaultCaseId): Promise<Arranged> {
        fake.resetFaults()
        if (id === 'unauthorized') return { provider: connector(fake.port, 'wrong-password'), message: EMAIL, timeoutMs: SEND_MS }
        if (id === 'refused') return { provider: connector(await closedPort()), message: EMAIL, timeoutMs: SEND_MS }
        if (id === 'not_on_channel') throw new Error('SMTP names no answer for this case')
        const [step, fault, timeoutMs = SEND_MS] = ANSWERS[id]
        fake.failAt(step, fault)
        return { provider: connector(), message: EMAIL, timeoutMs }
      },
      async stop() {
        connectors.forEach((smtp) => smtp.close())
        await fake.close()
      },
    }
  },
}
