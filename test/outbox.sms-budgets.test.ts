import { expect } from 'chai'
import { deliverBatch } from './support/run-once.ts'
import { createWorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { phoneRefusal } from '../src/identity/identifiers.ts'
import { QUEUES, type Channel, type DeliveryJobData } from '../src/outbox/constants.ts'
import { enqueueSecurityMessageTx } from '../src/outbox/enqueue.ts'
import { numberPrefix, phoneNumberAccepted, readPhoneNumber, smsAllowedFor } from '../src/outbox/phone-numbers.ts'
import { crossedCap, crossedNearCap, sendCapsFrom, type SendCaps } from '../src/outbox/send-caps.ts'
import { loadConfig } from '../src/providers/config.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000)
const HOUR = new Date('2026-12-02T10:00:00Z')
const STRICT = { allowFixedLine: false, allowVoip: false }

describe('SMS budgets and numbers, as pure functions', () => {
  it('reads one E.164 spelling and the type of a number', () => {
    expect(readPhoneNumber('+44 (0)7911 123-456')).to.deep.include({ e164: '+447911123456', valid: true })
    expect(readPhoneNumber('+1 800 FLOWERS'), 'no letters').to.equal(undefined)
    expect(readPhoneNumber('+447911123456 ext 5'), 'no extension').to.equal(undefined)
    expect(readPhoneNumber('+５４９１１５５５５４４５５'), 'no other script’s digits').to.equal(undefined)
  })

  it('accepts mobiles, and fixed lines and VoIP only where allowed; never premium-rate, toll-free, shared-cost or personal numbers', () => {
    const accepted = (written: string, policy = STRICT) => phoneNumberAccepted(readPhoneNumber(written)!, policy)
    expect(accepted('+4915112345678'), 'a German mobile').to.equal(true)
    expect(accepted('+14155550100'), 'a +1 number, fixed line or mobile').to.equal(true)
    expect(accepted('+442079460018'), 'a London landline').to.equal(false)
    expect(accepted('+442079460018', { ...STRICT, allowFixedLine: true })).to.equal(true)
    expect(accepted('+445612345678'), 'UK VoIP').to.equal(false)
    expect(accepted('+445612345678', { ...STRICT, allowVoip: true })).to.equal(true)
    const always = { allowFixedLine: true, allowVoip: true }
    for (const refused of ['+449098790000', '+448001234567', '+443001234567', '+447012345678', '+19005550100', '+447700900123'])
      expect(accepted(refused, always), refused).to.equal(false)
  })

  it('allows SMS by country, every country when none is listed', () => {
    expect(smsAllowedFor('+4915112345678', ['DE', 'AT'])).to.equal(true)
    expect(smsAllowedFor('+5491148885050', ['DE', 'AT'])).to.equal(false)
    expect(smsAllowedFor('+5491148885050', undefined)).to.equal(true)
  })

  it('refuses at the web a number outside SMS_ALLOWED_COUNTRIES only where SMS is the only phone channel', () => {
    const policy = { ...STRICT, smsCountries: ['DE'] }
    const argentine = { kind: 'phone' as const, value: '+5491148885050' }
    const smsOnly = new Set<Channel>(['email', 'sms'])
    expect(phoneRefusal(argentine, policy, smsOnly)).to.equal('unsupported_phone_number')
    expect(phoneRefusal({ kind: 'phone', value: '+4915112345678' }, policy, smsOnly)).to.equal(undefined)
    expect(phoneRefusal(argentine, policy, new Set<Channel>(['email', 'whatsapp', 'sms'])), 'WhatsApp may still reach it').to.equal(
      undefined,
    )
    expect(phoneRefusal({ kind: 'email', value: 'a@example.com' }, policy, smsOnly)).to.equal(undefined)
  })

  it("takes a prefix of seven digits, and warns once when a counter crosses 80 %, or an owners' counter its cap", () => {
    expect(numberPrefix('+447700900123')).to.equal('4477009')
    expect(numberPrefix('not a number')).to.equal(undefined)
    expect(crossedNearCap(20, 15, 16)).to.equal(true)
    expect(crossedNearCap(20, 16, 17)).to.equal(false)
    expect(crossedNearCap(20, 0, 20)).to.equal(true)
    expect(crossedNearCap(20, 0, 15)).to.equal(false)
    // Owners' counters hold nothing: the one count that takes them past the cap is warned of, once.
    expect(crossedCap(20, 20, 21)).to.equal(true)
    expect(crossedCap(20, 19, 25)).to.equal(true)
    expect(crossedCap(20, 21, 22)).to.equal(false)
    expect(crossedCap(20, 0, 20)).to.equal(false)
  })

  it('takes the SMS hourly cap from one variable, the sms entry of SEND_CAP_PER_HOUR (SMS_HOURLY_CAP is refused: test/config.schema.test.ts)', () => {
    expect(sendCapsFrom(loadConfig({ SEND_CAP_PER_HOUR: 'email:9,sms:40' }, 'worker')).perChannel).to.deep.equal({ sms: 40, email: 9 })
    expect(sendCapsFrom({ SMS_PREFIX_HOURLY_CAP: 20 })).to.include({ smsPerPrefix: 20 })
  })
})

describe('SMS budgets, enforced by the worker', () => {
  const f = useOutboxFixture()
  const metrics = createWorkerMetrics()
  const twilio = () => scriptedProvider((call) => ({ providerMessageId: `SM${call}` }), { id: 'twilio', channel: 'sms' })
  const fetchAll = async () =>
    await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 500, ignoreStartAfter: true })
  const deliver = async (caps: SendCaps, provider: ReturnType<typeof twilio>) => {
    const jobs = await fetchAll()
    await deliverBatch({ ...f.harness.deps({ sms: provider }), sendCaps: caps, metrics }, jobs)
    return jobs.length
  }
  /** An SMS to each number that a stranger's ask put there (a notice's body; its own transaction each): what the caps hold. */
  const enqueueSms = async (numbers: readonly string[]) => {
    const ids = new Map<string, string>()
    const deps = { boss: f.harness.webBoss, outboxKey: f.keys.outboxKey, codeHashKey: f.keys.codeHashKey }
    for (const destination of numbers) {
      const body = Buffer.from(JSON.stringify({ event: 'password_changed', at: f.now.toISOString(), identifier: '+54••••0000' }))
      const message = {
        purpose: 'security_notice' as const,
        channel: 'sms' as const,
        destination,
        locale: 'en',
        expiresAt: at(f.now, 7_200),
        asked: 'stranger' as const,
      }
      const { messageId } = await f.harness.api.transaction((trx) => enqueueSecurityMessageTx(trx, deps, message, body))
      ids.set(destination, messageId)
    }
    return ids
  }
  const gauge = async (scopeKind: string) =>
    (await metrics.registry.getSingleMetric('sealpost_send_cap_used_ratio')!.get()).values.find(
      (value) => value.labels.channel === 'sms' && value.labels.scope_kind === scopeKind,
    )?.value
  const lines = (text: string) =>
    f.logs
      .text()
      .split('\n')
      .filter((line) => line.includes(text))

  it('the SMS budgets under a burst to 200 numbers of one prefix: the prefix cap sends 20 and holds the rest unspent, another prefix still goes, the global cap stops the hour at 50, the next hour sends again', async () => {
    f.now = at(HOUR, 10 * 60)
    const caps = sendCapsFrom({ SMS_PREFIX_HOURLY_CAP: 20, SEND_CAP_PER_HOUR: { sms: 50 } })
    // The pump: 200 numbers of one rented block (+54 9 11 48xx xxxx: prefix 5491148), and one person elsewhere.
    const pumped = Array.from({ length: 200 }, (_, i) => `+5491148${String(100_000 + i)}`)
    const person = '+4915112345678'
    const ids = await enqueueSms([...pumped, person])
    const provider = twilio()
    expect(await deliver(caps, provider)).to.equal(201)

    const sentTo = provider.calls.map((call) => call.destination)
    expect(
      sentTo.filter((to) => to.startsWith('+5491148')),
      'the prefix cap lets 20 through',
    ).to.have.length(20)
    expect(sentTo, 'a number of another prefix still goes').to.include(person)
    const pending = await f.db.owner('outbox.security_outbox_messages').where({ state: 'pending', channel: 'sms' })
    expect(pending, 'the rest of the burst is held').to.have.length(180)
    for (const row of pending) expect(row.attempt_count, 'a hold spends no attempt').to.equal(0)
    expect(await f.db.owner('outbox.security_outbox_attempts').whereIn('message_id', [...ids.values()])).to.have.length(21)
    expect(await gauge('prefix'), 'the prefix cap is full').to.equal(1)
    expect(await gauge('channel')).to.equal(21 / 50)
    const near = lines('SEND CAP NEAR')
    expect(near, 'the prefix cap is near: one warning').to.have.length(1)
    expect(near[0]).to.include('"cap":"prefix"').and.include('"prefix":"5491•••"')
    expect(lines('SEND CAP REACHED')).to.have.length(1)
    for (const number of [...pumped.slice(0, 30), person]) expect(f.logs.text()).not.to.include(number.slice(4))

    // The same hour, one SMS each to 40 other prefixes: the global cap lets 29 through (50 in all) and warns.
    f.now = at(HOUR, 20 * 60)
    const spread = Array.from({ length: 40 }, (_, i) => `+49151${String(10 + i)}345678`)
    await enqueueSms(spread)
    await deliver(caps, provider)
    expect(provider.calls, 'the global cap: 50 SMS this hour').to.have.length(50)
    expect(await gauge('channel')).to.equal(1)
    expect(lines('SEND CAP NEAR').filter((line) => line.includes('"cap":"channel"'))).to.have.length(1)

    // The next hour: the prefix has room for 20 more and the other 11 go; nothing was lost.
    f.now = at(HOUR, 3600 + 30)
    await deliver(caps, provider)
    expect(provider.calls).to.have.length(50 + 20 + 11)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ state: 'pending', channel: 'sms' })).to.have.length(160)
    expect(await gauge('prefix'), 'a new hour starts from its own count').to.equal(1)
  })

  it('never sends an SMS to a country outside SMS_ALLOWED_COUNTRIES: dead-lettered provider_rejected, no provider call, no slot taken', async () => {
    f.now = at(HOUR, 10 * 60)
    const caps = sendCapsFrom({ SEND_CAP_PER_HOUR: { sms: 50 }, SMS_ALLOWED_COUNTRIES: ['DE'] })
    const ids = await enqueueSms(['+5491148885050', '+4915112345678'])
    const provider = twilio()
    await deliver(caps, provider)
    expect(provider.calls.map((call) => call.destination)).to.deep.equal(['+4915112345678'])
    expect(await f.rows.message(ids.get('+5491148885050')!)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(lines('SMS COUNTRY NOT ALLOWED')).to.have.length(1)
    expect(f.logs.text()).not.to.include('91148885050')
    const counted = await f.db.owner('outbox.send_windows').where({ channel: 'sms', scope: '' }).first()
    expect(counted.sent, 'only the sent one counts against the hour').to.equal(1)
  })
})
