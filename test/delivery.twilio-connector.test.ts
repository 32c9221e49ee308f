import { expect } from 'chai'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { createTwilioConnector, type TwilioSettings } from '../src/providers/twilio/connector.ts'
import { startFakeTwilio, type FakeTwilio, type TwilioBehavior } from '../src/providers/twilio/fake.ts'
import { createPhoneInbox } from '../src/providers/phone-inbox.ts'
import { capturingLogger } from './support/helpers.ts'

const ACCOUNT_SID = `AC${'1'.repeat(32)}`
const AUTH_TOKEN = 'twilio-auth-token-for-tests'
const API_KEY = { sid: `SK${'2'.repeat(32)}`, secret: 'twilio-api-key-secret-for-tests' }
const SERVICE_SID = `MG${'3'.repeat(32)}`
const CALLBACK = 'https://sealpost.example/webhooks/twilio'
const MESSAGE = { messageId: 'm-1', destination: '+5491155554455', subject: 'Your code', text: 'Your code is 123456.' }

type Outcome =
  { failureClass: string; providerCode: string; retryAfterAt: Date | null; effect: string | null } | { providerMessageId: string }

describe('Twilio connector against the fake Twilio', () => {
  let fake: FakeTwilio
  let logs: ReturnType<typeof capturingLogger>
  const connectors: ReturnType<typeof createTwilioConnector>[] = []
  const inbox = createPhoneInbox()
  const now = new Date('2026-12-02T12:00:00Z')

  const connector = (overrides: Partial<TwilioSettings> = {}) => {
    const created = createTwilioConnector({
      apiUrl: fake.url,
      accountSid: ACCOUNT_SID,
      credentials: { username: ACCOUNT_SID, password: AUTH_TOKEN },
      sender: { messagingServiceSid: SERVICE_SID },
      statusCallbackUrl: CALLBACK,
      clock: () => now,
      ...overrides,
    })
    connectors.push(created)
    return created
  }

  async function outcome(provider = connector(), timeoutMs = 2_000): Promise<Outcome> {
    try {
      return await provider.dispatch({ ...MESSAGE }, AbortSignal.timeout(timeoutMs))
    } catch (error) {
      if (!(error instanceof DeliveryFailureError)) throw error
      return { failureClass: error.failureClass, providerCode: error.providerCode, retryAfterAt: error.retryAfterAt, effect: error.effect }
    }
  }

  beforeEach(async () => {
    fake = await startFakeTwilio({ accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN, apiKey: API_KEY, inbox })
    logs = capturingLogger()
  })
  afterEach(async () => {
    for (const created of connectors.splice(0)) created.close()
    await fake.stop()
  })

  it('posts To, Body, the Messaging Service and the StatusCallback with basic auth, and returns the message sid', async () => {
    const sent = await outcome()
    expect(sent)
      .to.have.property('providerMessageId')
      .that.matches(/^SM[0-9a-f]{32}$/)
    expect(fake.requests[0]).to.include({
      to: MESSAGE.destination,
      body: MESSAGE.text,
      messagingServiceSid: SERVICE_SID,
      from: undefined,
      statusCallback: CALLBACK,
      authorization: `Basic ${Buffer.from(`${ACCOUNT_SID}:${AUTH_TOKEN}`).toString('base64')}`,
    })
    expect(inbox.list().at(-1)).to.include({ provider: 'twilio', to: MESSAGE.destination, text: MESSAGE.text })
  })

  it('sends from a From number and authenticates with an API key when configured so', async () => {
    const sent = await outcome(
      connector({ sender: { from: '+15005550006' }, credentials: { username: API_KEY.sid, password: API_KEY.secret } }),
    )
    expect(sent).to.have.property('providerMessageId')
    expect(fake.requests[0]).to.include({ from: '+15005550006', messagingServiceSid: undefined })
  })

  const cases: [string, TwilioBehavior | { number: number }, string, string | null][] = [
    ['21211 (an invalid To number)', { number: 21211 }, 'REJECTED', null],
    ['21614 (To is not a mobile number)', { number: 21614 }, 'REJECTED', null],
    ['21610 (the recipient unsubscribed with STOP)', { number: 21610 }, 'REJECTED', null],
    ['21612 (To cannot be reached from this sender)', { number: 21612 }, 'REJECTED', null],
    ['21408 (the region of To is not enabled)', { number: 21408 }, 'REJECTED', null],
    ['another 400', { kind: 'error', status: 400, code: 21617 }, 'REJECTED', null],
    ['a 429 with code 20429', { kind: 'error', status: 429, code: 20429 }, 'THROTTLED', null],
    ['a 500', { kind: 'error', status: 500, code: 20500 }, 'UNAVAILABLE', null],
    ['a 503 without a body', { kind: 'error', status: 503 }, 'UNAVAILABLE', null],
    ['a 504 (the gateway may have passed it on)', { kind: 'error', status: 504 }, 'INDETERMINATE', null],
    ['a 401 with code 20003 (our credentials)', { kind: 'error', status: 401, code: 20003 }, 'UNAVAILABLE', 'provider_misconfigured'],
    // Per destination: as misconfigured it would let one person's number hold SMS down for everyone.
    ['a 400 with code 21606 (this From cannot send to this destination)', { kind: 'error', status: 400, code: 21606 }, 'REJECTED', null],
    [
      'a 400 with code 21212 (a From that is no number at all)',
      { kind: 'error', status: 400, code: 21212 },
      'UNAVAILABLE',
      'provider_misconfigured',
    ],
    ['a reset connection', { kind: 'reset' }, 'INDETERMINATE', null],
    ['an unreadable 2xx', { kind: 'garbage' }, 'INDETERMINATE', null],
  ]
  for (const [name, behavior, failureClass, effect] of cases) {
    it(`maps ${name} to ${failureClass}${effect ? ` (${effect})` : ''} and copies none of Twilio's text`, async () => {
      if ('number' in behavior) fake.failNumber(MESSAGE.destination, behavior.number)
      else fake.behave(() => behavior)
      const failed = await outcome()
      expect(failed).to.deep.include({ failureClass, effect })
      expect(JSON.stringify(failed)).not.to.include(MESSAGE.destination)
      expect(logs.text()).not.to.include(MESSAGE.destination)
    })
  }

  it('honours Retry-After on a 429: the retry waits until Twilio said', async () => {
    fake.behave(() => ({ kind: 'error', status: 429, code: 20429, headers: { 'retry-after': '90' } }))
    expect(await outcome()).to.deep.include({ failureClass: 'THROTTLED', retryAfterAt: new Date(now.getTime() + 90_000) })
  })

  it('a refused auth token is the provider misconfigured on every send, and its text is never copied', async () => {
    const refused = connector({ credentials: { username: ACCOUNT_SID, password: 'not-the-token' } })
    for (let i = 0; i < 3; i++)
      expect(await outcome(refused)).to.deep.include({ failureClass: 'UNAVAILABLE', effect: 'provider_misconfigured' })
    expect(logs.text()).not.to.include('not-the-token')
  })

  it('a wrong account SID is a misconfiguration, not the person', async () => {
    const elsewhere = connector({ accountSid: `AC${'9'.repeat(32)}` })
    expect(await outcome(elsewhere)).to.deep.include({ failureClass: 'UNAVAILABLE', effect: 'provider_misconfigured' })
  })

  it('a timeout after the request was written is INDETERMINATE: Twilio may have sent it', async () => {
    fake.behave(() => ({ kind: 'accept-then-hang' }))
    expect(await outcome(connector(), 300)).to.deep.include({ failureClass: 'INDETERMINATE', providerCode: 'Timeout' })
    expect(fake.accepted()).to.have.length(1)
  })

  it('a timeout before the request was written (a TLS handshake that never ends) is UNAVAILABLE: nothing left', async () => {
    expect(await outcome(connector({ apiUrl: fake.stalledTlsUrl }), 300)).to.deep.include({
      failureClass: 'UNAVAILABLE',
      providerCode: 'Timeout',
    })
    expect(fake.requests).to.have.length(0)
  })

  it('a refused connection is UNAVAILABLE', async () => {
    const url = fake.url
    await fake.stop()
    fake = await startFakeTwilio({ accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN })
    expect(await outcome(connector({ apiUrl: url }))).to.deep.include({ failureClass: 'UNAVAILABLE', providerCode: 'ECONNREFUSED' })
  })
})
