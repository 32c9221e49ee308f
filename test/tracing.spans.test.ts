import { createHash, randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { Webhook } from 'standardwebhooks'
import { signingKeyOf } from '../src/hooks/standard-webhooks.ts'
import { startFakeTwilio, type FakeTwilio } from '../src/providers/twilio/fake.ts'
import { startFakePwnedPasswords } from './support/fake-pwned-passwords.ts'
import { eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useProcessFixture } from './support/process-fixture.ts'
import type { Spawned } from './support/processes.ts'

const SMS_HOOK = JSON.parse(readFileSync(new URL('./fixtures/hooks/supabase-send-sms.json', import.meta.url), 'utf8'))

/** One span as the OTLP/HTTP JSON exporter sends it, with the service that sent it. */
type ExportedSpan = {
  service: string
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: { key: string; value: Record<string, unknown> }[]
  events?: { name: string; attributes?: { key: string; value: Record<string, unknown> }[] }[]
  links?: { attributes?: unknown[] }[]
  status?: { code?: number; message?: string }
}
const SPAN_KIND = { server: 2, client: 3, producer: 4, consumer: 5 }

/** A collector on this machine that keeps every span the processes export (OTLP/HTTP, JSON). */
async function startCollector(): Promise<{ url: string; spans: ExportedSpan[]; stop: () => Promise<void> }> {
  const spans: ExportedSpan[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')))
    req.on('end', () => {
      const payload = JSON.parse(body) as {
        resourceSpans: { resource: { attributes: ExportedSpan['attributes'] }; scopeSpans: { spans: Omit<ExportedSpan, 'service'>[] }[] }[]
      }
      for (const resource of payload.resourceSpans) {
        const service = String(resource.resource.attributes?.find((a) => a.key === 'service.name')?.value.stringValue)
        for (const scope of resource.scopeSpans) for (const span of scope.spans) spans.push({ ...span, service })
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

/** What an operator reads in a span: its name, its attributes, its events, its status and links; not its timestamps. */
const readable = (span: ExportedSpan) =>
  JSON.stringify({ name: span.name, attributes: span.attributes, events: span.events, status: span.status, links: span.links })

describe('tracing (docs/operations.md "Tracing")', () => {
  const f = useProcessFixture()
  let collector: Awaited<ReturnType<typeof startCollector>>
  let pwned: Awaited<ReturnType<typeof startFakePwnedPasswords>>
  let twilio: FakeTwilio
  const running: Spawned[] = []
  const metricsToken = randomBytes(24).toString('hex')
  const kratosKey = `kratos-${randomBytes(24).toString('hex')}`
  const supabaseSecret = `v1,whsec_${randomBytes(32).toString('base64')}`
  const twilioAccount = { accountSid: `AC${randomBytes(16).toString('hex')}`, authToken: randomBytes(16).toString('hex') }
  before(async () => {
    collector = await startCollector()
    pwned = await startFakePwnedPasswords({ breached: [] })
    twilio = await startFakeTwilio(twilioAccount)
  })
  after(async () => {
    for (const process of running) {
      process.child.kill('SIGTERM')
      await process.exited
    }
    await collector?.stop()
    await pwned?.stop()
    await twilio?.stop()
  })

  it('follows a sign-up and a recovery from the request through the enqueue and the job to the provider call, and no span holds a secret, with every optional integration on', async function () {
    this.timeout(120_000)
    const tracing = {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      METRICS_TOKEN: metricsToken,
      // Every optional integration: the breached-password lookup, both hooks, SMS by Twilio (status
      // callbacks included), Wasender's webhook, inbound trace context from a trusted network.
      BREACHED_PASSWORD_API_URL: pwned.url,
      KRATOS_COURIER_API_KEY: kratosKey,
      KRATOS_LINK_ORIGINS: 'https://auth.example.org',
      SUPABASE_HOOK_SECRET: supabaseSecret,
      SUPABASE_LINK_ORIGINS: 'https://project-ref.supabase.co',
      TWILIO_ACCOUNT_SID: twilioAccount.accountSid,
      TWILIO_AUTH_TOKEN: twilioAccount.authToken,
      TWILIO_FROM_NUMBER: '+15005550006',
      TWILIO_API_URL: twilio.url,
      PUBLIC_BASE_URL: 'https://sealpost.example',
      PHONE_CHANNELS: 'sms',
      WASENDER_WEBHOOK_SECRET: randomBytes(16).toString('hex'),
      TRACE_TRUSTED_CALLERS: '10.0.0.0/8',
    }
    const worker = f.worker(tracing)
    running.push(worker)
    await worker.waitFor(/"message":"worker started"/, 'the worker to start')
    const web = f.web(tracing)
    running.push(web)
    const [, url] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')
    const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      return { status: response.status, body: (await response.text()) || '{}' }
    }
    const codeNumber = async (email: string, nth: number) => {
      const emails = await eventually(
        async () => {
          const found = await inbox(f.emulator.url, email)
          return found.length >= nth ? found : undefined
        },
        `message ${nth} for ${email}`,
        30_000,
      )
      return /\b(\d{6})\b/.exec(emails[nth - 1]!.body.text ?? '')![1]!
    }

    const email = uniqueEmail('traced')
    const password = `traced passphrase ${randomBytes(6).toString('hex')}`
    const newPassword = `renewed passphrase ${randomBytes(6).toString('hex')}`
    expect((await send('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const signUpCode = await codeNumber(email, 1)
    const confirmed = await send('POST', '/sign-ups/confirmation', { identifier: email, code: signUpCode, password })
    expect(confirmed.status).to.equal(201)
    const sessionToken = (JSON.parse(confirmed.body) as { token: string }).token
    expect((await send('GET', '/sessions', undefined, { authorization: `Bearer ${sessionToken}` })).status).to.equal(200)
    expect((await send('GET', `/healthz?token=${sessionToken}`)).status).to.equal(200)
    expect((await send('GET', '/metrics', undefined, { authorization: `Bearer ${metricsToken}` })).status).to.equal(200)
    expect((await send('POST', '/password-recoveries', { identifier: email })).status).to.equal(202)
    const recoveryCode = await codeNumber(email, 2)
    expect(
      (await send('POST', '/password-recoveries/completion', { identifier: email, code: recoveryCode, newPassword })).status,
    ).to.be.within(200, 204)
    // A phone sign-up by SMS (Twilio's path names the account) and a Kratos courier code.
    const phone = uniquePhone()
    expect((await send('POST', '/sign-ups', { identifier: phone, password })).status).to.equal(202)
    const smsCode = await eventually(
      async () => /\b(\d{6})\b/.exec(twilio.requests.find((request) => request.to === phone)?.body ?? '')?.[1],
      'the SMS code',
      30_000,
    )
    const kratosCode = String(10_000_000 + Math.floor(Math.random() * 80_000_000))
    const kratosTo = uniqueEmail('kratos')
    const kratosBody = { template_type: 'recovery_code_valid', to: kratosTo, recipient: kratosTo, recovery_code: kratosCode }
    expect((await send('POST', '/hooks/kratos/courier', kratosBody, { authorization: `Bearer ${kratosKey}` })).status).to.equal(200)
    await eventually(async () => ((await inbox(f.emulator.url, kratosTo)).length > 0 ? true : undefined), 'the Kratos code', 30_000)
    // A Supabase Send SMS hook call, signed as Supabase signs it: its OTP goes out by Twilio too.
    const hookPhone = uniquePhone()
    const hookOtp = String(100_000 + Math.floor(Math.random() * 800_000))
    const hookBody = JSON.stringify({ ...SMS_HOOK, user: { ...SMS_HOOK.user, phone: hookPhone }, sms: { otp: hookOtp } })
    const [id, timestamp] = [crypto.randomUUID(), String(Math.floor(Date.now() / 1000))]
    const signature = new Webhook(signingKeyOf(supabaseSecret)!, { format: 'raw' }).sign(id, new Date(Number(timestamp) * 1000), hookBody)
    const hooked = await fetch(`${url}/hooks/supabase/send-sms`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature },
      body: hookBody,
    })
    expect(hooked.status).to.equal(200)
    await eventually(async () => (twilio.requests.some((request) => request.to === hookPhone) ? true : undefined), 'the hook SMS', 30_000)
    const rangePrefixes = [password, newPassword].map((text) => createHash('sha1').update(text, 'utf8').digest('hex').slice(0, 5))
    expect(pwned.requests.map((request) => request.url.slice('/range/'.length).toLowerCase())).to.include.members(rangePrefixes)
    const envelopes = (await f.db.owner('outbox.security_outbox_ciphertexts').select('envelope')).map((row) => String(row.envelope))

    // Each request's trace, once both processes have exported it (each in batches of its own).
    const spans = collector.spans
    const traceOf = (request: string) => {
      const server = spans.find((span) => span.service === 'sealpost-web' && span.kind === SPAN_KIND.server && span.name === request)
      const inTrace = spans.filter((span) => span.traceId === server?.traceId)
      const trace = {
        enqueue: inTrace.find((span) => span.name === 'outbox enqueue' && span.kind === SPAN_KIND.producer),
        delivery: inTrace.find((span) => span.name === 'deliver email' && span.service === 'sealpost-worker'),
        providerCall: inTrace.find((span) => span.service === 'sealpost-worker' && span.kind === SPAN_KIND.client),
      }
      return server && trace.enqueue && trace.delivery && trace.providerCall ? trace : undefined
    }
    for (const request of ['POST /sign-ups', 'POST /password-recoveries']) {
      const { enqueue, delivery, providerCall } = await eventually(
        async () => traceOf(request),
        `${request}: its server span, enqueue, delivery and provider call in one trace`,
        30_000,
      )
      expect(delivery!.parentSpanId, `${request}: the delivery continues the enqueue`).to.equal(enqueue!.spanId)
      expect(providerCall!.traceId, `${request}: the provider call shares the enqueue's trace`).to.equal(enqueue!.traceId)
    }
    expect(
      spans.some((span) => span.service === 'sealpost-web' && span.name.startsWith('pg.query')),
      'pg statements are traced',
    ).to.equal(true)

    const secrets: [string, RegExp][] = [
      ['the sign-up code', new RegExp(`(?<!\\d)${signUpCode}(?!\\d)`)],
      ['the recovery code', new RegExp(`(?<!\\d)${recoveryCode}(?!\\d)`)],
      ['the password', new RegExp(password)],
      ['the new password', new RegExp(newPassword)],
      ['the session token', new RegExp(sessionToken)],
      ['the metrics bearer token', new RegExp(metricsToken)],
      ['the destination', new RegExp(email.replace(/[.+]/g, '\\$&'))],
      ['the destination’s local part', new RegExp(email.split('@')[0]!.replace(/[.+]/g, '\\$&'))],
      ['an envelope', /v\d+\.[^".]+\.[A-Za-z0-9+/=_-]{24,}/],
      ['an authorization header', /authorization|bearer/i],
      ['the SMS code', new RegExp(`(?<!\\d)${smsCode}(?!\\d)`)],
      ['the Kratos code', new RegExp(kratosCode)],
      ['the Kratos key', new RegExp(kratosKey)],
      ['the Supabase hook OTP', new RegExp(`(?<!\\d)${hookOtp}(?!\\d)`)],
      ['the Supabase hook secret', new RegExp(supabaseSecret.slice(10, 40).replace(/[+/]/g, '\\$&'))],
      ['the Twilio auth token', new RegExp(twilioAccount.authToken)],
      ["the Twilio account in a provider call's path", new RegExp(twilioAccount.accountSid)],
      ['the phone number', new RegExp(phone.slice(1))],
      ...rangePrefixes.map((prefix): [string, RegExp] => ['a breached-password range prefix', new RegExp(`/range/${prefix}`, 'i')]),
      ...envelopes.map((envelope): [string, RegExp] => ['a stored envelope', new RegExp(envelope.slice(-32).replace(/[+/=.]/g, '\\$&'))]),
    ]
    expect(spans.length).to.be.greaterThan(20)
    for (const span of spans) {
      const text = readable(span)
      for (const [what, pattern] of secrets)
        expect(pattern.test(text), `${what} in ${span.service} span "${span.name}": ${text}`).to.equal(false)
    }
  })
})
