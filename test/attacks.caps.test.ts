import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { DeliveryDeps } from '../jobs/delivery-deps.ts'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { createSessionTx } from '../src/identity/sessions.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { sendCapsFrom } from '../src/outbox/send-caps.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { deliverBatch } from './support/run-once.ts'
import { scriptedProvider } from './support/scripted-provider.ts'
import { useWebStack } from './support/web-stack.ts'

/** The start of a clock hour a little ahead of the database's: each test counts in an hour of its own. */
const hourStart = (offsetHours: number) => new Date((Math.floor(Date.now() / 3_600_000) + offsetHours) * 3_600_000)
const PASSWORD = 'a pumped number asks for a code'

/**
 * Attacks on the fleet's send caps (docs/security.md "Caps from the owner's side"): a cap is a
 * ceiling on what strangers can make us send, so whatever a stranger spends of it must never hold
 * back the codes an owner asks for. The web is the real one (SMS its only phone channel, on a
 * clock the test moves); the worker is the real pipeline, one batch at a time (`runOnce`).
 */
describe('attacks on the send caps', () => {
  let now = new Date()
  const METRICS_TOKEN = 'caps-metrics-token-0123456789abcdef'
  const f = useWebStack({ worker: false, whatsapp: false, sms: true, clock: () => now, metricsToken: METRICS_TOKEN })
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

  const twilio = scriptedProvider((call) => ({ providerMessageId: `SM${call}` }), { id: 'twilio', channel: 'sms' })
  const deps = (caps: Parameters<typeof sendCapsFrom>[0]): DeliveryDeps => ({
    db: worker,
    boss,
    outboxKey: f.keys.outboxKey,
    providers: { sms: [twilio] },
    clock: () => now,
    logger: f.logs.logger,
    settings: { maxAttempts: 5, retrySchedule: [5_000, 30_000, 120_000, 600_000, 1_800_000], sendTimeoutMs: 2_000 },
    invitationLinkBaseUrl: 'https://app.sealpost.test',
    sendCaps: sendCapsFrom(caps),
    phoneChannels: ['sms'],
  })
  /** One worker pass over every job there is (held ones come round again and are held again). */
  const deliver = async (caps: Parameters<typeof sendCapsFrom>[0]) => {
    const jobs = await boss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 500, ignoreStartAfter: true })
    await deliverBatch(deps(caps), jobs)
  }
  const sentTo = (numbers: readonly string[]) => twilio.calls.filter((call) => numbers.includes(call.destination))
  const rowsTo = (numbers: readonly string[]) => f.db.owner('outbox.security_outbox_messages').whereIn('destination', [...numbers])

  /** An owner of a number: an active identity with it verified, and a session of theirs. */
  async function owner(number: string) {
    const { identityId } = await createVerifiedIdentity(f.db.owner, number)
    const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, now))
    return { number, auth: f.stack.bearer(token) }
  }
  const signUp = async (number: string) =>
    expect((await f.stack.call('POST', '/sign-ups', { identifier: number, password: PASSWORD })).status, number).to.equal(202)

  /**
   * The attack under one cap setting: a stranger signs up 25 distinct valid mobiles (nobody will
   * ever type their codes) until the cap holds; then, the same hour, owners whose numbers share the
   * prefix (and the country, and the channel) ask for a recovery code and a step-up code.
   */
  async function pumpThenOwnersAsk(offsetHours: number, block: string, caps: Parameters<typeof sendCapsFrom>[0]) {
    now = new Date(hourStart(offsetHours).getTime() + 5 * 60_000)
    const pumped = Array.from({ length: 25 }, (_, i) => `+49151${block}${String(100_000 + i)}`)
    for (const number of pumped) await signUp(number)
    await deliver(caps)
    expect(sentTo(pumped), 'the cap lets 20 of the pump through').to.have.length(20)

    now = new Date(now.getTime() + 10 * 60_000)
    const alice = await owner(`+49151${block}900001`)
    const bob = await owner(`+49151${block}900002`)
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: alice.number })).status).to.equal(202)
    expect((await f.stack.call('POST', '/step-ups', {}, bob.auth)).status).to.equal(202)
    const more = Array.from({ length: 3 }, (_, i) => `+49151${block}${String(200_000 + i)}`)
    for (const number of more) await signUp(number)
    await deliver(caps)

    expect(
      sentTo([alice.number, bob.number]).map((call) => [call.destination, call.purpose]),
      "the owners' recovery and step-up codes go out now",
    ).to.have.deep.members([
      [alice.number, 'password_recovery'],
      [bob.number, 'step_up'],
    ])
    // Held to the end of the hour, past their ten minutes of life: dead-lettered unsent, never sent late.
    const held = (await rowsTo([...pumped, ...more])).filter((row) => row.state !== 'published')
    expect(held, 'the pump is still held: 5 of the first burst and all 3 later sign-ups').to.have.length(8)
    for (const row of held) expect(row, 'a hold spends no attempt').to.include({ state: 'dead_lettered', attempt_count: 0 })
    const reasons = await f.db
      .owner('outbox.security_outbox_dead_letters')
      .whereIn(
        'message_id',
        held.map((row) => row.id),
      )
      .pluck('reason')
    expect(new Set(reasons)).to.deep.equal(new Set(['challenge_expired']))
    expect(sentTo(more), 'nothing more of the pump goes this hour').to.have.length(0)
  }

  it('a stranger fills an SMS prefix with sign-ups to distinct valid mobiles: owners in that prefix still get their recovery and step-up codes, and the pump is still held', async () => {
    await pumpThenOwnersAsk(1, '12', { SMS_PREFIX_HOURLY_CAP: 20 })
  })

  it("a stranger fills a country's cap the same way: its owners still get their codes, and the pump is still held", async () => {
    await pumpThenOwnersAsk(2, '13', { PHONE_CAP_PER_COUNTRY_PER_HOUR: { '49': 20 } })
  })

  it("a stranger fills the SMS channel's cap the same way: owners still get their codes, and the pump is still held", async () => {
    await pumpThenOwnersAsk(3, '14', { SEND_CAP_PER_HOUR: { sms: 20 } })
  })

  it('a leaked courier key fills the SMS cap: given its own share of the caps, it cannot starve the identity flows', async () => {
    now = new Date(hourStart(4).getTime() + 5 * 60_000)
    const caps = { SEND_CAP_PER_HOUR: { sms: 20 }, COURIER_CAP_SHARE: 50 } as Parameters<typeof sendCapsFrom>[0]
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const staff = await createElevatedSession(f.db.owner, identityId, now)
    const body = { name: 'leaked', purposes: ['verification_code'], channels: ['sms'] }
    const key = String((await f.stack.call('POST', '/platform-admin/api-keys', body, staff)).body!.key)
    const leaked = Array.from({ length: 30 }, (_, i) => `+4915115${String(100_000 + i)}`)
    for (const destination of leaked) {
      const message = {
        purpose: 'verification_code',
        channel: 'sms',
        destination,
        secret: { code: '123456' },
        expiresAt: new Date(now.getTime() + 600_000).toISOString(),
      }
      const headers = { authorization: `Bearer ${key}`, 'idempotency-key': destination }
      expect((await f.stack.call('POST', '/v1/messages', message, headers)).status).to.equal(202)
    }
    await deliver(caps)
    expect(sentTo(leaked), "the key's share: half the cap").to.have.length(10)

    const people = Array.from({ length: 5 }, (_, i) => `+4915116${String(100_000 + i)}`)
    for (const number of people) await signUp(number)
    await deliver(caps)
    expect(sentTo(people), "the identity flows' sign-ups still go").to.have.length(5)
    expect(sentTo(leaked), 'the key gets no more this hour').to.have.length(10)
  })

  it("an operator sees the pump and its cost: the prefix cap's use by who asked, and a prefix whose codes nobody confirms", async () => {
    now = new Date(hourStart(7).getTime() + 5 * 60_000)
    const caps = { SMS_PREFIX_HOURLY_CAP: 20 }
    const pumped = Array.from({ length: 25 }, (_, i) => `+4915117${String(100_000 + i)}`)
    for (const number of pumped) await signUp(number)
    const alice = await owner('+4915117900001')
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: alice.number })).status).to.equal(202)
    await deliver(caps)
    const code = /\b(\d{6})\b/.exec(sentTo([alice.number])[0]!.text)![1]
    const completion = { identifier: alice.number, code, newPassword: 'alice took her account back' }
    expect((await f.stack.call('POST', '/password-recoveries/completion', completion)).status).to.equal(204)

    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const staff = await createElevatedSession(f.db.owner, identityId, now)
    const report = await f.stack.call('GET', '/platform-admin/security-outbox/send-caps', undefined, staff)
    expect(report.status).to.equal(200)
    const scopes = report.body!.scopes as Record<string, unknown>[]
    expect(scopes).to.deep.include.members([
      { channel: 'sms', kind: 'prefix', scope: '4915', asked: 'stranger', sent: 20, cap: 20 },
      { channel: 'sms', kind: 'prefix', scope: '4915', asked: 'owner', sent: 1, cap: 20 },
    ])
    const conversion = report.body!.conversion as Record<string, unknown>[]
    expect(conversion).to.deep.include({ channel: 'sms', prefix: '4915•••', sent: 21, confirmed: 1, ratio: 1 / 21 })
    expect(JSON.stringify(report.body), 'no number').not.to.match(/4915117\d/)

    const metrics = await fetch(`${f.stack.web.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    expect(metrics.status).to.equal(200)
    const text = await metrics.text()
    expect(text).to.include('sealpost_send_cap_sends{channel="sms",scope_kind="prefix",scope="4915•••",asked="stranger"} 20')
    expect(text).to.include('sealpost_send_cap_sends{channel="sms",scope_kind="prefix",scope="4915•••",asked="owner"} 1')
    expect(text).to.include('sealpost_codes_sent_last_hour{channel="sms",prefix="4915•••"} 21')
    expect(text).to.include('sealpost_codes_confirmed_last_hour{channel="sms",prefix="4915•••"} 1')
    expect(text, 'no number').not.to.match(/4915117\d/)
  })
})
