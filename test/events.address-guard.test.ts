import { expect } from 'chai'
import { checkWebhookUrlShape, isForbiddenAddress } from '../src/platform/webhook-address-guard.ts'
import { decideWebhook } from '../src/platform/webhook-retry.ts'

describe('webhook address guard', () => {
  it('refuses loopback, private, CGNAT, link-local, this-network, multicast and their IPv6 and IPv4-mapped forms', () => {
    for (const address of [
      '127.0.0.1',
      '127.255.0.9',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      '100.127.255.254',
      '169.254.169.254',
      '0.0.0.0',
      '0.1.2.3',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:a00:1',
      '::ffff:169.254.169.254',
      '64:ff9b::a00:1',
      'not an address',
    ])
      expect(isForbiddenAddress(address), address).to.equal(true)
  })

  it('lets public addresses through', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:93.184.216.34'])
      expect(isForbiddenAddress(address), address).to.equal(false)
  })

  it('asks https, no credentials and no IP literal, unless the host is allow-listed (and http only outside production)', () => {
    const policy = { production: false, allowedHosts: ['127.0.0.1', 'receiver.internal'] }
    const code = (url: string, p = policy) => {
      try {
        checkWebhookUrlShape(url, p)
        return 'ok'
      } catch (error) {
        return (error as { code: string }).code
      }
    }
    expect(code('https://hooks.example.com/x')).to.equal('ok')
    expect(code('http://hooks.example.com/x')).to.equal('webhook_url_not_https')
    expect(code('http://127.0.0.1:8080/x')).to.equal('ok')
    expect(code('http://receiver.internal/x', { ...policy, production: true })).to.equal('webhook_url_not_https')
    expect(code('https://user:pass@hooks.example.com/x')).to.equal('webhook_url_invalid')
    expect(code('https://10.0.0.1/x')).to.equal('webhook_url_forbidden_address')
    expect(code('https://[::ffff:127.0.0.1]/x')).to.equal('webhook_url_forbidden_address')
    expect(code('ftp://hooks.example.com/x')).to.equal('webhook_url_not_https')
    expect(code('hooks.example.com')).to.equal('webhook_url_invalid')
  })
})

describe('webhook retry decision', () => {
  const settings = { maxAttempts: 3, retrySchedule: [5_000, 60_000], maxRetryAfterSeconds: 300 }
  const now = new Date('2026-12-02T12:00:00Z')
  const answered = (status: number, retryAfterAt: Date | null = null) => ({ kind: 'answered' as const, status, retryAfterAt })
  const at = (ms: number) => new Date(now.getTime() + ms)

  it('decides each answer as the table says', () => {
    const table: [string, ReturnType<typeof decideWebhook>][] = [
      ['200', decideWebhook(settings, 1, answered(200), now)],
      ['204', decideWebhook(settings, 1, answered(204), now)],
      ['503 first', decideWebhook(settings, 1, answered(503), now)],
      ['408 second', decideWebhook(settings, 2, answered(408), now)],
      ['429 with Retry-After 120 s', decideWebhook(settings, 1, answered(429, at(120_000)), now)],
      ['429 with Retry-After 2 h (capped)', decideWebhook(settings, 1, answered(429, at(7_200_000)), now)],
      ['timeout', decideWebhook(settings, 1, { kind: 'failed', failure: 'timeout' }, now)],
      ['500 last', decideWebhook(settings, 3, answered(500), now)],
      ['400', decideWebhook(settings, 1, answered(400), now)],
      ['410', decideWebhook(settings, 1, answered(410), now)],
      ['302', decideWebhook(settings, 1, answered(302), now)],
      ['refused address', decideWebhook(settings, 1, { kind: 'unsent' }, now)],
    ]
    expect(Object.fromEntries(table)).to.deep.equal({
      '200': { kind: 'delivered', status: 200 },
      '204': { kind: 'delivered', status: 204 },
      '503 first': { kind: 'retry', at: at(5_000), status: 503, failure: 'retryable_status' },
      '408 second': { kind: 'retry', at: at(60_000), status: 408, failure: 'retryable_status' },
      '429 with Retry-After 120 s': { kind: 'retry', at: at(120_000), status: 429, failure: 'retryable_status' },
      '429 with Retry-After 2 h (capped)': { kind: 'retry', at: at(300_000), status: 429, failure: 'retryable_status' },
      timeout: { kind: 'retry', at: at(5_000), status: null, failure: 'timeout' },
      '500 last': { kind: 'dead_lettered', status: 500, failure: 'retries_exhausted' },
      '400': { kind: 'dead_lettered', status: 400, failure: 'rejected' },
      '410': { kind: 'dead_lettered', status: 410, failure: 'rejected' },
      '302': { kind: 'dead_lettered', status: 302, failure: 'rejected' },
      'refused address': { kind: 'dead_lettered', status: null, failure: 'address_refused' },
    })
  })
})
