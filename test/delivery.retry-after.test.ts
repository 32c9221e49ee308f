import { expect } from 'chai'
import { parseRateLimitReset, parseRetryAfter, providerRetryAt } from '../src/providers/retry-after.ts'

const NOW = new Date('2026-11-30T12:00:00.000Z')
const at = (ms: number) => new Date(NOW.getTime() + ms)

describe('provider retry hints', () => {
  const headers: [string, Date | null][] = [
    ['120', at(120_000)],
    ['Mon, 30 Nov 2026 12:05:00 GMT', new Date('2026-11-30T12:05:00Z')],
    ['Mon, 30 Nov 2026 11:00:00 GMT', null],
    ['-5', null],
    ['soon', null],
    ['', null],
  ]
  for (const [header, expected] of headers) {
    it(`parses Retry-After "${header}"`, () => {
      expect(parseRetryAfter(header, NOW)).to.deep.equal(expected)
    })
  }

  it('reads X-RateLimit-Reset as Unix seconds and ignores a past or malformed one', () => {
    expect(parseRateLimitReset(String(NOW.getTime() / 1000 + 60), NOW)).to.deep.equal(at(60_000))
    expect(parseRateLimitReset(String(NOW.getTime() / 1000 - 60), NOW)).to.equal(null)
    expect(parseRateLimitReset('soon', NOW)).to.equal(null)
  })

  it('takes the later of the two hints, or none', () => {
    expect(providerRetryAt({ retryAfter: '30', rateLimitReset: String(NOW.getTime() / 1000 + 90) }, NOW)).to.deep.equal(at(90_000))
    expect(providerRetryAt({ retryAfter: '120', rateLimitReset: null }, NOW)).to.deep.equal(at(120_000))
    expect(providerRetryAt({}, NOW)).to.equal(null)
  })
})
