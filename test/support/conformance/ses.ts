import { createSesConnector } from '../../../src/providers/ses/connector.ts'
import { startSesEmulator } from '../../../src/providers/ses/emulator.ts'
import { startFaultySes, type SesFault } from '../../../src/providers/ses/fake.ts'
import type { FaultCaseId } from '../../../src/providers/faults.ts'
import { closedPort, startStalledTls } from '../dead-ends.ts'
import { EMAIL, retryAfter, SEND_MS, TIMEOUT_MS, type Arranged, type ConformanceFixture } from './fixture.ts'

const throttle = (headers: Record<string, string> = {}): SesFault => ({ status: 429, errorType: 'TooManyRequestsException', headers })

/** SES v2 through the real SDK client, against the faulty endpoint in front of the SES emulator. */
export const sesFixture: ConformanceFixture = {
  id: 'ses',
  hints: true,
  async start() {
    const emulator = await startSesEmulator(0)
    const faulty = await startFaultySes(emulator.url)
    const stalled = await startStalledTls()
    const connectors: { close(): void }[] = []
    const connector = (endpoint: string) => {
      const ses = createSesConnector({
        region: 'us-east-1',
        fromAddress: 'no-reply@sealpost.test',
        endpoint,
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      })
      connectors.push(ses)
      return ses
    }
    const answering = (fault: SesFault, timeoutMs = SEND_MS): Arranged => {
      faulty.fail(() => fault)
      return { provider: connector(faulty.url), message: EMAIL, timeoutMs }
    }
    const hinted = (hint: 'seconds' | 'date') => {
      const { header, at } = retryAfter(hint)
      return { ...answering(throttle({ 'Retry-After': header })), hintAt: at }
    }
    const cases: Record<Exclude<FaultCaseId, 'not_on_channel'>, () => Promise<Arranged>> = {
      malformed: async () => answering({ status: 400, errorType: 'BadRequestException' }),
      unauthorized: async () => answering({ status: 403, errorType: 'UnrecognizedClientException' }),
      forbidden: async () => answering({ status: 403, errorType: 'AccessDeniedException' }),
      not_found: async () => answering({ status: 404, errorType: 'NotFoundException' }),
      too_large: async () => answering({ status: 413 }),
      throttled: async () => answering(throttle()),
      throttled_seconds: async () => hinted('seconds'),
      throttled_date: async () => hinted('date'),
      server_error: async () => answering({ status: 500, errorType: 'InternalFailure' }),
      bad_gateway: async () => answering({ status: 502 }),
      unavailable: async () => answering({ status: 503, errorType: 'ServiceUnavailable' }),
      gateway_timeout: async () => answering({ status: 504 }),
      refused: async () => ({ provider: connector(`http://127.0.0.1:${await closedPort()}`), message: EMAIL, timeoutMs: SEND_MS }),
      timeout_before: async () => ({ provider: connector(stalled.url), message: EMAIL, timeoutMs: TIMEOUT_MS }),
      timeout_after: async () => answering('forward-then-hang', TIMEOUT_MS),
      reset: async () => answering('reset'),
      recipient_refused: async () => answering({ status: 400, errorType: 'MessageRejected' }),
      unreadable_success: async () => answering('garbage'),
    }
    const arrange = async (id: FaultCaseId): Promise<Arranged> => {
      if (id === 'not_on_channel') throw new Error('SES names no answer for this case')
      return await cases[id]()
    }
    return {
      arrange,
      async stop() {
        connectors.forEach((ses) => ses.close())
        await Promise.all([faulty.stop(), stalled.stop(), emulator.stop()])
      },
    }
  },
}
