import { createWasenderConnector } from '../../../src/providers/wasender/connector.ts'
import { startFakeWasender, type WasenderBehavior } from '../../../src/providers/wasender/fake.ts'
import type { FaultCaseId } from '../../../src/providers/faults.ts'
import { closedPort, startStalledTls } from '../dead-ends.ts'
import { PHONE, retryAfter, SEND_MS, TIMEOUT_MS, type Arranged, type ConformanceFixture } from './fixture.ts'

const KEY = 'wasender-api-key'
const status = (code: number, body?: unknown, headers?: Record<string, string>): WasenderBehavior => ({
  kind: 'status',
  status: code,
  body,
  headers,
})

/** What the fake answers for each case the connector meets with its usual settings. */
const BEHAVIORS: Partial<Record<FaultCaseId, WasenderBehavior>> = {
  malformed: status(400, { success: false, message: 'Invalid JSON payload' }),
  forbidden: status(403, { success: false, message: 'Forbidden' }),
  not_found: status(404, { success: false, message: 'Not Found' }),
  too_large: status(413),
  throttled: status(429),
  server_error: status(500),
  bad_gateway: status(502),
  unavailable: status(503),
  gateway_timeout: status(504),
  timeout_after: { kind: 'accept-then-hang' },
  reset: { kind: 'reset' },
  recipient_refused: status(422, {
    success: false,
    message: 'Validation failed',
    errors: { to: ['The to must be a valid phone number.'] },
  }),
  unreadable_success: { kind: 'garbage' },
}

/** Wasender through undici, against the fake Wasender that speaks its API. */
export const wasenderFixture: ConformanceFixture = {
  id: 'wasender',
  hints: true,
  async start() {
    const fake = await startFakeWasender(KEY)
    const stalled = await startStalledTls()
    const connectors: { close(): void }[] = []
    const connector = (apiUrl = fake.url, apiKey = KEY) => {
      const wasender = createWasenderConnector({ apiUrl, apiKey })
      connectors.push(wasender)
      return wasender
    }
    return {
      async arrange(id: FaultCaseId): Promise<Arranged> {
        fake.behave(() => ({ kind: 'accept' }))
        const sent = (provider = connector(), timeoutMs = SEND_MS): Arranged => ({ provider, message: PHONE, timeoutMs })
        if (id === 'unauthorized') return sent(connector(fake.url, 'a-key-wasender-does-not-know'))
        if (id === 'refused') return sent(connector(`http://127.0.0.1:${await closedPort()}`))
        if (id === 'timeout_before') return sent(connector(stalled.url), TIMEOUT_MS)
        if (id === 'throttled_seconds' || id === 'throttled_date') {
          const { header, at } = retryAfter(id === 'throttled_seconds' ? 'seconds' : 'date')
          fake.behave(() => status(429, undefined, { 'retry-after': header }))
          return { ...sent(), hintAt: at }
        }
        const behavior = BEHAVIORS[id]
        if (!behavior) throw new Error(`Wasender names no answer for ${id}`)
        fake.behave(() => behavior)
        return sent(connector(), id === 'timeout_after' ? TIMEOUT_MS : SEND_MS)
      },
      async stop() {
        connectors.forEach((wasender) => wasender.close())
        await Promise.all([fake.stop(), stalled.stop()])
      },
    }
  },
}
