import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { DeliveryDeps } from '../jobs/delivery-deps.ts'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { NO_SEND_CAPS } from '../src/outbox/send-caps.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import type { KeyRequest } from './support/courier-kit.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { deliverBatch } from './support/run-once.ts'
import { scriptedProvider } from './support/scripted-provider.ts'
import { useWebStack } from './support/web-stack.ts'

/**
 * Review of a courier key's bounds (docs/courier.md "Keys") from outside: keys made through the
 * staff route, `POST /v1/messages` on the real web, the worker's own pipeline (`runOnce`) with
 * scripted providers. What a key may do is its scope and its budgets, whatever the caller tries:
 * several requests at once, another channel through the phone fallback, a link that parsers read
 * differently.
 */
describe('review: attacks with a courier key on its bounds', () => {
  let now = new Date()
  const f = useWebStack({ worker: false, whatsapp: true, sms: true, clock: () => now })
  let worker: Knex
  let boss: PgBoss
  before(async () => {
    worker = createKnex(f.db.workerUrl, { applicationName: 'test-worker' })
    boss = createBoss(f.db.workerUrl, 'web', f.logs.logger)
    await boss.start()
  })
  after(async () => {
    await boss?.stop({ graceful: false })
    await worker?.destroy()
  })
  beforeEach(() => {
    now = new Date(now.getTime() + 2 * 3_600_000)
  })

  const inMinutes = (minutes: number) => new Date(now.getTime() + minutes * 60_000).toISOString()
  const stranger = () => `s.${randomBytes(5).toString('hex')}@victims.example`
  const code = (destination: string, channel = 'email') => ({
    purpose: 'verification_code',
    channel,
    destination,
    secret: { code: '123456' },
    expiresAt: inMinutes(10),
  })
  /** A key made through the real staff route, by a stepped-up staff member, at the stack's time. */
  async function key(request: KeyRequest): Promise<string> {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const headers = await createElevatedSession(f.db.owner, identityId, now)
    const body = { name: 'leaky app', purposes: ['verification_code'], channels: ['email'], ...request }
    const created = await f.stack.call('POST', '/platform-admin/api-keys', body, headers)
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    return String(created.body!.key)
  }
  const kit = {
    send: (apiKey: string, body: unknown) =>
      f.stack.call('POST', '/v1/messages', body, { authorization: `Bearer ${apiKey}`, 'idempotency-key': randomBytes(12).toString('hex') }),
  }
  /** Every request at once; the statuses as answered. */
  const atOnce = async (requests: (() => Promise<{ status: number }>)[]) =>
    (await Promise.all(requests.map((send) => send()))).map((a) => a.status)
  const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length

  /** One worker pass over every job there is, with these providers. */
  const deliver = async (providers: DeliveryDeps['providers'], phoneChannels: DeliveryDeps['phoneChannels']) => {
    const jobs = await boss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 500, ignoreStartAfter: true })
    await deliverBatch(
      {
        db: worker,
        boss,
        outboxKey: f.keys.outboxKey,
        providers,
        clock: () => now,
        logger: f.logs.logger,
        settings: { maxAttempts: 5, retrySchedule: [5_000, 30_000, 120_000, 600_000, 1_800_000], sendTimeoutMs: 2_000 },
        invitationLinkBaseUrl: 'https://app.sealpost.test',
        sendCaps: NO_SEND_CAPS,
        phoneChannels,
      },
      jobs,
    )
  }

  it("twenty requests at once spend a key's hourly volume once each: no more than sendsPerHour are accepted", async () => {
    const leaked = await key({ sendsPerHour: 5, perDestinationPerHour: 100 })
    const statuses = await atOnce(Array.from({ length: 20 }, () => () => kit.send(leaked, code(stranger()))))
    expect(count(statuses, 202), statuses.join(' ')).to.equal(5)
    expect(count(statuses, 429), statuses.join(' ')).to.equal(15)
  })

  it('twenty requests at once to twenty new addresses spend the new-address budget once each', async () => {
    const leaked = await key({ destinationsPerHour: 4 })
    const statuses = await atOnce(Array.from({ length: 20 }, () => () => kit.send(leaked, code(stranger()))))
    expect(count(statuses, 202), statuses.join(' ')).to.equal(4)
  })

  it("twenty requests at once to one address (as +tag variants) spend that address's budget once each", async () => {
    const leaked = await key({ perDestinationPerHour: 3 })
    const [local, domain] = stranger().split('@')
    const statuses = await atOnce(Array.from({ length: 20 }, (_, i) => () => kit.send(leaked, code(`${local}+${i}@${domain}`))))
    expect(count(statuses, 202), statuses.join(' ')).to.equal(3)
  })

  it('a key scoped to whatsapp cannot send an SMS: a number without WhatsApp is not sent the code by the phone fallback', async () => {
    const whatsappOnly = await key({ channels: ['whatsapp'] })
    const number = uniquePhone()
    expect((await kit.send(whatsappOnly, code(number, 'whatsapp'))).status).to.equal(202)
    const noWhatsApp = () => new DeliveryFailureError('REJECTED', '131026', null, true, 'channel_unreachable')
    const cloud = scriptedProvider(noWhatsApp, { id: 'whatsapp_cloud', channel: 'whatsapp' })
    const twilio = scriptedProvider((call) => ({ providerMessageId: `SM${call}` }), { id: 'twilio', channel: 'sms' })
    const providers: Record<string, Provider[]> = { whatsapp: [cloud], sms: [twilio] }
    await deliver(providers, ['whatsapp', 'sms'])
    await deliver(providers, ['whatsapp', 'sms'])
    expect(
      cloud.calls.map((call) => call.destination),
      'tried on WhatsApp, its scope',
    ).to.deep.equal([number])
    expect(twilio.calls, 'never by SMS, a channel the key may not send on').to.have.length(0)
  })

  it('a magic link whose authority a non-browser parser reads as another host (a backslash before @) goes out only as the browser reads it', async () => {
    const links = await key({ purposes: ['magic_link'], linkOrigins: ['https://app.example.test'] })
    const to = stranger()
    // WHATWG URL: host app.example.test, path /@evil.example/…; RFC 3986 readers (and many link
    // scanners and app link handlers) see user info `app.example.test\` and the host evil.example.
    const smuggled = 'https://app.example.test\\@evil.example/sign-in?token=abc'
    const body = { purpose: 'magic_link', channel: 'email', destination: to, secret: { link: smuggled }, expiresAt: inMinutes(10) }
    const answer = await kit.send(links, body)
    if (answer.status !== 202) return expect([answer.status, answer.body?.code]).to.deep.equal([422, 'invalid_link'])
    const email = scriptedProvider((call) => ({ providerMessageId: `e${call}` }))
    await deliver({ email: [email] }, ['whatsapp', 'sms'])
    const sent = email.calls.find((call) => call.destination === to)!
    expect(sent.text, 'the link as the allowed origin reads it').not.to.include('\\@evil.example')
    expect(sent.html ?? '', 'the link as the allowed origin reads it').not.to.include('\\@evil.example')
  })

  it('a magic link is judged and sent as a browser reads it: user info, a trailing dot, another port or a look-alike is refused; case, a default port and an escaped dot go out normalized', async () => {
    const links = await key({ purposes: ['magic_link'], linkOrigins: ['https://app.example.test'] })
    const to = stranger()
    const send = (link: string) =>
      kit.send(links, { purpose: 'magic_link', channel: 'email', destination: to, secret: { link }, expiresAt: inMinutes(10) })
    for (const [link, code] of [
      ['https://app.example.test@evil.example/x', 'invalid_link'],
      ['https://evil.example@app.example.test/x', 'invalid_link'],
      ['https://app.example.test./x', 'link_origin_not_allowed'],
      ['https://app.example.test:444/x', 'link_origin_not_allowed'],
      ['https://app.example.test%2eevil.example/x', 'link_origin_not_allowed'],
      ['https://xn--pp-6kc.example.test/x', 'link_origin_not_allowed'],
      ['http://app.example.test/x', 'invalid_link'],
      ['https://app.example.test/x\tevil', 'invalid_link'],
    ] as const) {
      const answer = await send(link)
      expect([answer.status, answer.body?.code], link).to.deep.equal([422, code])
    }
    for (const link of ['https://APP.Example.TEST/a', 'https://app.example.test:443/b', 'https://app%2Eexample.test/c'])
      expect((await send(link)).status, link).to.equal(202)
    const email = scriptedProvider((call) => ({ providerMessageId: `e${call}` }))
    await deliver({ email: [email] }, ['whatsapp', 'sms'])
    const texts = email.calls.filter((call) => call.destination === to).map((call) => call.text)
    for (const path of ['a', 'b', 'c'])
      expect(
        texts.some((text) => text.includes(`https://app.example.test/${path}`)),
        path,
      ).to.equal(true)
    expect(texts.join('\n')).not.to.match(/APP\.Example|:443|%2E/)
  })
})
