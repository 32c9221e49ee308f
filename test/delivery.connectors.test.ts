import { expect } from 'chai'
import { freePort } from '../src/db/embedded.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { createSesConnector } from '../src/providers/ses/connector.ts'
import { createWasenderConnector } from '../src/providers/wasender/connector.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeWasender, type WasenderBehavior } from '../src/providers/wasender/fake.ts'
import { startFaultySes, type SesFault } from '../src/providers/ses/fake.ts'

const MESSAGE = { messageId: 'm-1', destination: '+5491155554455', subject: 'Your code', text: 'Your code is 123456.' }

async function outcome(
  provider: Provider,
  timeoutMs = 2_000,
): Promise<{ failureClass: string; retryAfterAt: Date | null } | { providerMessageId: string }> {
  try {
    return await provider.dispatch({ ...MESSAGE }, AbortSignal.timeout(timeoutMs))
  } catch (error) {
    if (!(error instanceof DeliveryFailureError)) throw error
    return { failureClass: error.failureClass, retryAfterAt: error.retryAfterAt }
  }
}

describe('Wasender connector against the fake Wasender', () => {
  const apiKey = 'test-api-key-not-secret'
  let fake: Awaited<ReturnType<typeof startFakeWasender>>
  let connector: ReturnType<typeof createWasenderConnector>
  const now = new Date('2026-11-30T12:00:00Z')

  beforeEach(async () => {
    fake = await startFakeWasender(apiKey)
    connector = createWasenderConnector({ apiUrl: fake.url, apiKey, clock: () => now })
  })
  afterEach(async () => {
    connector.close()
    await fake.stop()
  })

  it('sends {to, text} with the bearer key and returns the provider message id', async () => {
    expect(await outcome(connector)).to.deep.equal({ providerMessageId: '1' })
    expect(fake.requests[0]).to.include({ to: MESSAGE.destination, text: MESSAGE.text, authorization: `Bearer ${apiKey}` })
  })

  const cases: [string, WasenderBehavior, string, number | null][] = [
    ['400', { kind: 'status', status: 400 }, 'REJECTED', null],
    ['404 (our route or session is unknown)', { kind: 'status', status: 404 }, 'UNAVAILABLE', null],
    ['422', { kind: 'status', status: 422 }, 'REJECTED', null],
    ['413', { kind: 'status', status: 413 }, 'REJECTED', null],
    ['429 with Retry-After seconds', { kind: 'status', status: 429, headers: { 'retry-after': '120' } }, 'THROTTLED', 120_000],
    [
      '429 with an HTTP-date Retry-After',
      { kind: 'status', status: 429, headers: { 'retry-after': 'Mon, 30 Nov 2026 12:03:00 GMT' } },
      'THROTTLED',
      180_000,
    ],
    [
      '429 with X-RateLimit-Reset',
      { kind: 'status', status: 429, headers: { 'x-ratelimit-reset': String(now.getTime() / 1000 + 45) } },
      'THROTTLED',
      45_000,
    ],
    [
      '429 with a past Retry-After',
      { kind: 'status', status: 429, headers: { 'retry-after': 'Mon, 30 Nov 2026 11:00:00 GMT' } },
      'THROTTLED',
      null,
    ],
    [
      '429 with nonsense hints',
      { kind: 'status', status: 429, headers: { 'retry-after': 'later', 'x-ratelimit-reset': 'soon' } },
      'THROTTLED',
      null,
    ],
    ['500', { kind: 'status', status: 500 }, 'UNAVAILABLE', null],
    ['502', { kind: 'status', status: 502 }, 'UNAVAILABLE', null],
    ['503', { kind: 'status', status: 503 }, 'UNAVAILABLE', null],
    ['504', { kind: 'status', status: 504 }, 'INDETERMINATE', null],
    ['a 2xx saying success: false', { kind: 'status', status: 200, body: { success: false } }, 'INDETERMINATE', null],
    ['an unparseable 2xx', { kind: 'garbage' }, 'INDETERMINATE', null],
    ['a connection reset after the request was written', { kind: 'reset' }, 'INDETERMINATE', null],
  ]
  for (const [what, behavior, failureClass, retryInMs] of cases) {
    it(`classifies ${what} as ${failureClass}`, async () => {
      fake.behave(() => behavior)
      expect(await outcome(connector)).to.deep.equal({
        failureClass,
        retryAfterAt: retryInMs === null ? null : new Date(now.getTime() + retryInMs),
      })
    })
  }

  it('classifies a provider that never answers within the send timeout as INDETERMINATE', async () => {
    fake.behave(() => ({ kind: 'hang' }))
    expect(await outcome(connector, 200)).to.deep.equal({ failureClass: 'INDETERMINATE', retryAfterAt: null })
  })

  it('classifies a refused connection as UNAVAILABLE', async () => {
    const closed = createWasenderConnector({ apiUrl: `http://127.0.0.1:${await freePort()}`, apiKey })
    expect(await outcome(closed)).to.deep.equal({ failureClass: 'UNAVAILABLE', retryAfterAt: null })
    closed.close()
  })

  it('treats a refused API key as the provider misconfigured, never the person: no attempt of theirs is spent on it', async () => {
    const wrongKey = createWasenderConnector({ apiUrl: fake.url, apiKey: 'wrong-key-value' })
    const refused = await wrongKey.dispatch({ ...MESSAGE }, AbortSignal.timeout(2_000)).catch((error: unknown) => error)
    expect(refused).to.be.instanceOf(DeliveryFailureError).and.include({ failureClass: 'UNAVAILABLE', effect: 'provider_misconfigured' })
    expect(JSON.stringify(refused)).not.to.include('wrong-key-value')
    wrongKey.close()
  })
})

describe('SES connector against a fault-injecting SES endpoint', () => {
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let faulty: Awaited<ReturnType<typeof startFaultySes>>
  let connector: ReturnType<typeof createSesConnector>

  before(async () => {
    emulator = await startSesEmulator(0)
    faulty = await startFaultySes(emulator.url)
    connector = createSesConnector({
      region: 'us-east-1',
      fromAddress: 'no-reply@sealpost.test',
      endpoint: faulty.url,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    })
  })
  after(async () => {
    connector.close()
    await faulty.stop()
    await emulator.stop()
  })

  it('returns the SES message id of an accepted email', async () => {
    faulty.fail(() => 'forward')
    const result = await outcome({
      ...connector,
      dispatch: (message, signal) => connector.dispatch({ ...message, destination: 'ses-ok@example.com' }, signal),
    })
    expect(result).to.have.property('providerMessageId').that.matches(/^ses-/)
  })

  const cases: [SesFault, string][] = [
    [{ status: 400, errorType: 'MessageRejected' }, 'REJECTED'],
    [{ status: 400, errorType: 'BadRequestException' }, 'REJECTED'],
    [{ status: 429, errorType: 'TooManyRequestsException' }, 'THROTTLED'],
    [{ status: 400, errorType: 'LimitExceededException' }, 'THROTTLED'],
    [{ status: 403, errorType: 'AccessDeniedException' }, 'UNAVAILABLE'],
    [{ status: 503, errorType: 'ServiceUnavailable' }, 'UNAVAILABLE'],
    [{ status: 504, errorType: 'GatewayTimeout' }, 'INDETERMINATE'],
  ]
  for (const [fault, failureClass] of cases) {
    it(`classifies ${typeof fault === 'object' ? `${fault.status} ${fault.errorType}` : fault} as ${failureClass}`, async () => {
      faulty.fail(() => fault)
      expect(await outcome(connector)).to.have.property('failureClass', failureClass)
    })
  }

  it('makes exactly one request per attempt (SDK retries off)', async () => {
    faulty.fail(() => ({ status: 503, errorType: 'ServiceUnavailable' }))
    const before = faulty.calls()
    await outcome(connector)
    expect(faulty.calls() - before).to.equal(1)
  })

  it('classifies an SES endpoint that never answers within the send timeout as INDETERMINATE', async () => {
    faulty.fail(() => 'hang')
    expect(await outcome(connector, 200)).to.have.property('failureClass', 'INDETERMINATE')
  })
})
