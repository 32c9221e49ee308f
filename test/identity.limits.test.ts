import { expect } from 'chai'
import { createSessionTx } from '../src/identity/sessions.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useProcessFixture } from './support/process-fixture.ts'
import { useWebStack } from './support/web-stack.ts'
import { checkedFetch } from './support/api-check.ts'

describe('per-destination limit across web processes', () => {
  const f = useProcessFixture()

  it('answers the 6th code to one destination within the hour with 429 and Retry-After, counted across two web processes', async function () {
    this.timeout(60_000)
    const urls: string[] = []
    for (let i = 0; i < 2; i++) urls.push((await f.web().waitFor(/"url":"(http:\/\/[^"]+)"/, 'a web process to listen'))[1]!)
    // Six people each try to add the same address: six codes to one destination.
    const target = uniqueEmail('popular')
    const statuses: number[] = []
    let retryAfter: string | null = null
    for (let i = 0; i < 6; i++) {
      const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail(`person${i}`))
      const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, new Date()))
      const response = await checkedFetch(`${urls[i % 2]}/sign-in-methods`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ identifier: target }),
      })
      statuses.push(response.status)
      if (response.status === 429) {
        retryAfter = response.headers.get('retry-after')
        expect(((await response.json()) as { code: string }).code).to.equal('rate_limited')
      }
    }
    expect(statuses).to.deep.equal([202, 202, 202, 202, 202, 429])
    expect(Number(retryAfter)).to.be.within(3_500, 3_600)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: target })).to.have.length(5)
  })
})

describe('per-client limit on the public routes', () => {
  const f = useWebStack({ worker: false, clientLimitPerMinute: 3 })

  it('answers a client past its per-minute allowance with 429 and Retry-After, on any public route', async () => {
    const statuses = []
    for (const path of ['/password-recoveries', '/password-recoveries', '/sessions', '/password-recoveries']) {
      const body = path === '/sessions' ? { identifier: uniqueEmail(), password: 'x' } : { identifier: uniqueEmail() }
      const response = await f.stack.call('POST', path, body)
      statuses.push(response.status)
      if (response.status === 429) {
        expect(response.body).to.include({ code: 'too_many_requests' })
        expect(Number(response.headers.get('retry-after'))).to.be.within(1, 60)
      }
    }
    expect(statuses).to.deep.equal([202, 202, 401, 429])
  })
})

describe('password recovery and account enumeration', () => {
  const f = useWebStack({ worker: false })
  const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

  it('answers known and unknown identifiers alike in status, headers, body keys and latency (200 requests each)', async function () {
    this.timeout(120_000)
    const known = Array.from({ length: 200 }, () => uniqueEmail('known'))
    for (const email of known) await createVerifiedIdentity(f.db.owner, email)
    const unknown = Array.from({ length: 200 }, () => uniqueEmail('unknown'))
    const requests = known.flatMap((email, i) => [{ kind: 'known' as const, email }, { kind: 'unknown' as const, email: unknown[i]! }])

    const samples = { known: [] as number[], unknown: [] as number[] }
    const shapes = new Set<string>()
    let next = 0
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < requests.length) {
          const { kind, email } = requests[next++]!
          const started = performance.now()
          const response = await checkedFetch(`${f.stack.web.url}/password-recoveries`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ identifier: email }) })
          const body = (await response.json()) as Record<string, unknown>
          samples[kind].push(performance.now() - started)
          shapes.add(JSON.stringify([response.status, response.headers.get('content-type'), response.headers.get('content-length'), response.headers.get('cache-control'), Object.keys(body)]))
        }
      }),
    )
    expect([...shapes], 'one answer shape for both').to.have.length(1)
    expect(await f.db.owner('outbox.security_outbox_messages')).to.have.length(200)

    const known50 = percentile(samples.known.sort((a, b) => a - b), 50)
    const unknown50 = percentile(samples.unknown.sort((a, b) => a - b), 50)
    const known90 = percentile(samples.known, 90)
    const unknown90 = percentile(samples.unknown, 90)
    process.stdout.write(`      latency ms known p50 ${known50.toFixed(1)} p90 ${known90.toFixed(1)} | unknown p50 ${unknown50.toFixed(1)} p90 ${unknown90.toFixed(1)}\n`)
    // The bound: medians within 15 ms and 90th percentiles within 40 ms of each other, under a 150 ms floor.
    expect(Math.abs(known50 - unknown50)).to.be.below(15)
    expect(Math.abs(known90 - unknown90)).to.be.below(40)
  })
})
