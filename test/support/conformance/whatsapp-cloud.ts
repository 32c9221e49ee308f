import { createWhatsAppCloudConnector } from '../../../src/providers/whatsapp-cloud/connector.ts'
import { startFakeWhatsAppCloud, type CloudApiBehavior } from '../../../src/providers/whatsapp-cloud/fake.ts'
import type { FaultCaseId } from '../../../src/providers/faults.ts'
import { closedPort, startStalledTls } from '../dead-ends.ts'
import { PHONE, retryAfter, SEND_MS, TIMEOUT_MS, type Arranged, type ConformanceFixture } from './fixture.ts'

const ACCOUNT = { accessToken: 'cloud-access-token', phoneNumberId: '1055500000', template: 'sealpost_code' }
const error = (status: number, code: number, headers?: Record<string, string>): CloudApiBehavior => ({
  kind: 'error',
  status,
  code,
  headers,
})

/** What the fake answers for each case the connector meets with its usual settings. */
const BEHAVIORS: Partial<Record<FaultCaseId, CloudApiBehavior>> = {
  malformed: error(400, 100),
  forbidden: error(403, 10),
  too_large: { kind: 'status', status: 413 },
  throttled: error(429, 130429),
  server_error: error(500, 131000),
  bad_gateway: { kind: 'status', status: 502 },
  unavailable: { kind: 'status', status: 503 },
  gateway_timeout: { kind: 'status', status: 504 },
  timeout_after: { kind: 'accept-then-hang' },
  reset: { kind: 'reset' },
  recipient_refused: error(400, 131050),
  unreadable_success: { kind: 'garbage' },
}

/** Meta's Cloud API through undici, against the fake Cloud API that checks the token, the path and the template. */
export const whatsAppCloudFixture: ConformanceFixture = {
  id: 'whatsapp_cloud',
  hints: true,
  async start() {
    const fake = await startFakeWhatsAppCloud(ACCOUNT)
    const stalled = await startStalledTls()
    const connectors: { close(): void }[] = []
    const connector = (overrides: Partial<typeof ACCOUNT & { apiUrl: string }> = {}) => {
      const cloud = createWhatsAppCloudConnector({
        apiUrl: fake.url,
        ...ACCOUNT,
        languages: 'en:en_US',
        ...overrides,
      })
      connectors.push(cloud)
      return cloud
    }
    let unreachable = 0
    return {
      async arrange(id: FaultCaseId): Promise<Arranged> {
        fake.behave(() => ({ kind: 'accept' }))
        const sent = (provider = connector(), timeoutMs = SEND_MS, message = PHONE): Arranged => ({ provider, message, timeoutMs })
        if (id === 'unauthorized') return sent(connector({ accessToken: 'a-token-meta-does-not-know' }))
        if (id === 'not_found') return sent(connector({ phoneNumberId: '1055599999' }))
        if (id === 'refused') return sent(connector({ apiUrl: `http://127.0.0.1:${await closedPort()}` }))
        if (id === 'timeout_before') return sent(connector({ apiUrl: stalled.url }), TIMEOUT_MS)
        if (id === 'not_on_channel') {
          const destination = `+44770090${String(++unreachable).padStart(4, '0')}`
          fake.withoutWhatsApp(destination)
          return sent(connector(), SEND_MS, { ...PHONE, destination })
        }
        if (id === 'throttled_seconds' || id === 'throttled_date') {
          const { header, at } = retryAfter(id === 'throttled_seconds' ? 'seconds' : 'date')
          fake.behave(() => error(429, 130429, { 'retry-after': header }))
          return { ...sent(), hintAt: at }
        }
        const behavior = BEHAVIORS[id]
        if (!behavior) throw new Error(`the Cloud API names no answer for ${id}`)
        fake.behave(() => behavior)
        return sent(connector(), id === 'timeout_after' ? TIMEOUT_MS : SEND_MS)
      },
      async stop() {
        connectors.forEach((cloud) => cloud.close())
        await Promise.all([fake.stop(), stalled.stop()])
      },
    }
  },
}
