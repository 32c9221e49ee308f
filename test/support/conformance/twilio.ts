import { createTwilioConnector } from '../../../src/providers/twilio/connector.ts'
import { startFakeTwilio, type TwilioBehavior } from '../../../src/providers/twilio/fake.ts'
import type { FaultCaseId } from '../../../src/providers/faults.ts'
import { closedPort } from '../dead-ends.ts'
import { PHONE, retryAfter, SEND_MS, TIMEOUT_MS, type Arranged, type ConformanceFixture } from './fixture.ts'

const ACCOUNT_SID = `AC${'a'.repeat(32)}`
const AUTH_TOKEN = 'twilio-auth-token-0001'
const API_KEY = { sid: `SK${'c'.repeat(32)}`, secret: 'twilio-api-key-secret-01' }
const error = (status: number, code?: number, headers?: Record<string, string>): TwilioBehavior => ({
  kind: 'error',
  status,
  ...(code === undefined ? {} : { code }),
  headers,
})

/** What the fake answers for each case the connector meets with its usual settings. */
const BEHAVIORS: Partial<Record<FaultCaseId, TwilioBehavior>> = {
  malformed: error(400, 21602),
  forbidden: error(403, 20003),
  too_large: error(413),
  throttled: error(429, 20429),
  server_error: error(500),
  bad_gateway: error(502),
  unavailable: error(503),
  gateway_timeout: error(504),
  timeout_after: { kind: 'accept-then-hang' },
  reset: { kind: 'reset' },
  unreadable_success: { kind: 'garbage' },
}

/** Twilio's Messages API through undici, against the fake Twilio (basic auth, form body, status callbacks). */
export const twilioFixture: ConformanceFixture = {
  id: 'twilio',
  hints: true,
  async start() {
    const fake = await startFakeTwilio({ accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN, apiKey: API_KEY })
    const connectors: { close(): void }[] = []
    const connector = (overrides: { apiUrl?: string; accountSid?: string; credentials?: { username: string; password: string } } = {}) => {
      const twilio = createTwilioConnector({
        apiUrl: overrides.apiUrl ?? fake.url,
        accountSid: overrides.accountSid ?? ACCOUNT_SID,
        credentials: overrides.credentials ?? { username: ACCOUNT_SID, password: AUTH_TOKEN },
        sender: { from: '+15005550006' },
        statusCallbackUrl: 'https://sealpost.example.com/webhooks/twilio',
      })
      connectors.push(twilio)
      return twilio
    }
    let refusedNumbers = 0
    return {
      async arrange(id: FaultCaseId): Promise<Arranged> {
        fake.behave(() => ({ kind: 'accept' }))
        const sent = (provider = connector(), timeoutMs = SEND_MS, message = PHONE): Arranged => ({ provider, message, timeoutMs })
        if (id === 'unauthorized') return sent(connector({ credentials: { username: ACCOUNT_SID, password: 'not-the-auth-token-01' } }))
        // An API key of one account on another account's path (a mistyped TWILIO_ACCOUNT_SID): Twilio answers 404, code 20404.
        if (id === 'not_found')
          return sent(connector({ accountSid: `AC${'b'.repeat(32)}`, credentials: { username: API_KEY.sid, password: API_KEY.secret } }))
        if (id === 'refused') return sent(connector({ apiUrl: `http://127.0.0.1:${await closedPort()}` }))
        if (id === 'timeout_before') return sent(connector({ apiUrl: fake.stalledTlsUrl }), TIMEOUT_MS)
        if (id === 'recipient_refused') {
          const destination = `+44770091${String(++refusedNumbers).padStart(4, '0')}`
          fake.failNumber(destination, 21211)
          return sent(connector(), SEND_MS, { ...PHONE, destination })
        }
        if (id === 'throttled_seconds' || id === 'throttled_date') {
          const { header, at } = retryAfter(id === 'throttled_seconds' ? 'seconds' : 'date')
          fake.behave(() => error(429, 20429, { 'retry-after': header }))
          return { ...sent(), hintAt: at }
        }
        const behavior = BEHAVIORS[id]
        if (!behavior) throw new Error(`Twilio names no answer for ${id}`)
        fake.behave(() => behavior)
        return sent(connector(), id === 'timeout_after' ? TIMEOUT_MS : SEND_MS)
      },
      async stop() {
        connectors.forEach((twilio) => twilio.close())
        await fake.stop()
      },
    }
  },
}
