import { createHash, randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { startFakePwnedPasswords } from './support/fake-pwned-passwords.ts'
import { useProcessFixture } from './support/process-fixture.ts'

type Attribute = { key: string; value: Record<string, unknown> }
type ExportedSpan = { service: string; traceId: string; name: string; kind: number; attributes?: Attribute[]; events?: unknown[] }
/** What a span says, less the ids (random hex: any five letters of it could spell a prefix) and the times. */
const readable = (span: ExportedSpan) =>
  JSON.stringify([span.name, (span.attributes ?? []).filter((a) => !/(^|[._])id$/.test(a.key)), span.events ?? []])
const SERVER = 2
const CLIENT = 3

/** An OTLP/HTTP JSON collector on this machine, keeping every span it is sent. */
async function startCollector() {
  const spans: ExportedSpan[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')))
    req.on('end', () => {
      const payload = JSON.parse(body) as {
        resourceSpans: { resource: { attributes: Attribute[] }; scopeSpans: { spans: Omit<ExportedSpan, 'service'>[] }[] }[]
      }
      for (const resource of payload.resourceSpans) {
        const service = String(resource.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue)
        for (const scope of resource.scopeSpans) for (const span of scope.spans) spans.push({ ...span, service })
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/**
 * Attacks through tracing (docs/operations.md "Tracing"): what the web exports must not carry a
 * password-derived value, and a caller must not steer which of its requests are traced or into
 * which trace.
 */
describe('attacks through tracing', () => {
  const f = useProcessFixture()
  let collector: Awaited<ReturnType<typeof startCollector>>
  let pwned: Awaited<ReturnType<typeof startFakePwnedPasswords>>
  let url: string
  before(async function () {
    this.timeout(120_000)
    collector = await startCollector()
    pwned = await startFakePwnedPasswords({ breached: ['password1234'] })
    const web = f.web({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      BREACHED_PASSWORD_API_URL: pwned.url,
      // Every hop trusted, so a test can speak for any client address; only 10.0.0.0/8 may carry a trace in.
      TRUST_PROXY: 'true',
      TRACE_TRUSTED_CALLERS: '10.0.0.0/8',
    })
    url = (await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen'))[1]!
  })
  after(async () => {
    await collector?.stop()
    await pwned?.stop()
  })
  const send = (path: string, body: unknown, headers: Record<string, string>) =>
    fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

  it("a new password's breached-password range prefix never reaches an exported span", async function () {
    this.timeout(60_000)
    // A prefix with a letter in it: no port number or status code of a span can spell it.
    let password: string
    let prefix: string
    do {
      password = `a new passphrase ${randomBytes(6).toString('hex')}`
      prefix = createHash('sha1').update(password, 'utf8').digest('hex').slice(0, 5)
    } while (!/[a-f]/.test(prefix))
    const answer = await send('/sign-ups', { identifier: uniqueEmail('traced'), password }, { 'x-forwarded-for': '198.51.100.7' })
    expect(answer.status).to.equal(202)
    expect(pwned.requests.map((request) => request.url.toLowerCase())).to.include(`/range/${prefix}`)
    const call = await eventually(
      async () => collector.spans.find((span) => span.service === 'sealpost-web' && span.kind === CLIENT),
      'the range lookup’s client span',
      30_000,
    )
    expect(call, 'the lookup is traced').to.be.an('object')
    for (const span of collector.spans) expect(readable(span).toLowerCase(), `span "${span.name}"`).not.to.include(prefix)
  })

  it("a caller's traceparent neither hides its request from tracing nor carries its trace id in; a trusted caller's is honoured", async function () {
    this.timeout(60_000)
    const traceparent = (traceId: string, flags: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-${flags}`
    const [hidden, steered, trusted] = [randomBytes(16).toString('hex'), randomBytes(16).toString('hex'), randomBytes(16).toString('hex')]
    const stranger = { 'x-forwarded-for': '198.51.100.8' }
    expect(
      (await send('/password-recoveries', { identifier: uniqueEmail('a') }, { ...stranger, traceparent: traceparent(hidden, '00') }))
        .status,
    ).to.equal(202)
    expect(
      (await send('/sign-ups', { identifier: 'not an address', password: 'x' }, { ...stranger, traceparent: traceparent(steered, '01') }))
        .status,
    ).to.equal(422)
    const inside = { 'x-forwarded-for': '10.1.2.3', traceparent: traceparent(trusted, '01') }
    expect((await send('/sessions', { identifier: uniqueEmail('b'), password: 'whatever it is' }, inside)).status).to.equal(401)

    const server = (name: string) => () =>
      Promise.resolve(collector.spans.find((span) => span.service === 'sealpost-web' && span.kind === SERVER && span.name === name))
    const recovery = await eventually(server('POST /password-recoveries'), 'the unsampled request’s server span', 30_000)
    expect(recovery.traceId, 'a new trace, not the one the caller named').not.to.equal(hidden)
    const signUp = await eventually(server('POST /sign-ups'), 'the steered request’s server span', 30_000)
    expect(signUp.traceId, 'a new trace, not the one the caller named').not.to.equal(steered)
    expect(collector.spans.some((span) => span.traceId === steered || span.traceId === hidden)).to.equal(false)
    const signIn = await eventually(server('POST /sessions'), 'the trusted caller’s server span', 30_000)
    expect(signIn.traceId, 'a trusted caller continues its own trace').to.equal(trusted)
  })
})
