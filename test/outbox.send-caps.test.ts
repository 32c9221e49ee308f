import { expect } from 'chai'
import { deliverBatch } from './support/run-once.ts'
import { createWorkerMetrics } from '../src/metrics/worker-metrics.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { CAP_CHANNELS, parseChannelCaps, parseCountryCaps } from '../config/send-caps.ts'
import { callingCodeOf } from '../src/outbox/phone-numbers.ts'
import { CHANNELS } from '../src/outbox/constants.ts'
import { capScopeOf, classCap, sendWindow, type SendCaps } from '../src/outbox/send-caps.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000)
const HOUR = new Date('2026-12-02T10:00:00Z')
let phoneCounter = 0
/** A unique number under the given country calling code. */
const phoneIn = (code: string) => `+${code}${'7009'.slice(0, 11 - code.length)}${String(++phoneCounter).padStart(6, '0')}`

describe('send caps, as pure functions', () => {
  it('reads the country calling code off a number as libphonenumber does, the one reading of numbers', () => {
    expect(callingCodeOf('+14155550100')).to.equal('1')
    expect(callingCodeOf('+74951234567')).to.equal('7')
    expect(callingCodeOf('+447700900123')).to.equal('44')
    expect(callingCodeOf('+4915112345678')).to.equal('49')
    expect(callingCodeOf('+353861234567')).to.equal('353')
    expect(callingCodeOf('+5491123456789')).to.equal('54')
    expect(callingCodeOf('+8613812345678')).to.equal('86')
    expect(callingCodeOf('+85291234567')).to.equal('852')
    expect(callingCodeOf('not a number')).to.equal(undefined)
    // The table of its own the caps had took any third digit for a code: +999 is assigned to nobody.
    expect(callingCodeOf('+9991234567890'), 'an unassigned code').to.equal(undefined)
  })

  it('counts per clock hour', () => {
    expect(sendWindow(at(HOUR, 59 * 60 + 59))).to.deep.equal({ start: HOUR, end: at(HOUR, 3600) })
    expect(sendWindow(at(HOUR, 3600)).start).to.deep.equal(at(HOUR, 3600))
  })

  it('parses the configuration and refuses what is not a channel or a calling code', () => {
    expect(CAP_CHANNELS, 'a cap may name every channel and nothing else').to.deep.equal(CHANNELS)
    expect(parseChannelCaps('email:20000, whatsapp:2000')).to.deep.equal({ email: 20000, whatsapp: 2000 })
    expect(parseChannelCaps('')).to.deep.equal({})
    expect(parseCountryCaps('44:500,1:1000,*:200')).to.deep.equal({ '44': 500, '1': 1000, '*': 200 })
    expect(() => parseChannelCaps('fax:5')).to.throw(/email:20000/)
    expect(() => parseChannelCaps('email:5,email:6')).to.throw()
    expect(() => parseCountryCaps('4:5')).to.throw(/calling codes/)
    expect(() => parseCountryCaps('999:5'), 'an unassigned three-digit code (the old table took it)').to.throw(/calling codes/)
    expect(parseCountryCaps('353:5,1:2')).to.deep.equal({ '353': 5, '1': 2 })
    expect(() => parseCountryCaps('44:-1')).to.throw()
  })
})

describe('send caps per class of who asked, as pure functions', () => {
  const caps: SendCaps = { perChannel: { sms: 100 }, perCountry: { '44': 50 }, smsPerPrefix: 20 }
  const sms = { channel: 'sms' as const, destination: '+447700900123' }

  it("counts owners on a counter of their own that holds nothing, compared with the whole cap, and courier sends the strangers' unless COURIER_CAP_SHARE sets them apart", () => {
    expect(capScopeOf(caps, 'prefix', sms, 'stranger')).to.deep.equal({
      channel: 'sms',
      kind: 'prefix',
      asked: 'stranger',
      scope: 'p4477009',
      cap: 20,
      bounded: true,
    })
    expect(capScopeOf(caps, 'prefix', sms, 'owner')).to.deep.include({ asked: 'owner', scope: 'op4477009', cap: 20, bounded: false })
    expect(capScopeOf(caps, 'country', sms, 'owner')).to.deep.include({ scope: 'o44', cap: 50 })
    expect(capScopeOf(caps, 'channel', sms, 'courier'), 'with the strangers').to.deep.include({ asked: 'stranger', scope: '', cap: 100 })
    const shared = { ...caps, courierShare: 30 }
    expect(capScopeOf(shared, 'channel', sms, 'courier')).to.deep.include({ asked: 'courier', scope: 'c', cap: 30, bounded: true })
    expect(capScopeOf(shared, 'channel', sms, 'stranger'), 'the rest').to.deep.include({ scope: '', cap: 70 })
    expect(capScopeOf(shared, 'channel', sms, 'owner'), 'owners are compared with the whole cap').to.deep.include({ scope: 'o', cap: 100 })
    expect(classCap({ courierShare: 30 }, 3, 'courier'), 'rounded down').to.equal(0)
    expect(capScopeOf(caps, 'prefix', { channel: 'whatsapp', destination: sms.destination }, 'stranger'), 'prefixes are SMS only').to.equal(
      undefined,
    )
    expect(capScopeOf(caps, 'country', { channel: 'email', destination: 'a@example.com' }, 'owner')).to.equal(undefined)
  })
})

describe('send caps, enforced by the worker', () => {
  const f = useOutboxFixture()
  const metrics = createWorkerMetrics()
  const fetchAll = async () => await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 50, ignoreStartAfter: true })
  const deliver = async (caps: SendCaps, provider: ReturnType<typeof scriptedProvider>) => {
    const jobs = await fetchAll()
    await deliverBatch({ ...f.harness.deps({ email: provider, whatsapp: provider }), sendCaps: caps, metrics }, jobs)
    return jobs.length
  }
  const ok = () => scriptedProvider((call) => ({ providerMessageId: `p-${call}` }))
  const heldMetric = async (channel: string, cap: string) =>
    (await metrics.registry.getSingleMetric('sealpost_send_cap_held_total')!.get()).values.find(
      (value) => value.labels.channel === channel && value.labels.cap === cap,
    )?.value ?? 0

  it('a distributed pump runs up the bill: a code each to thousands of addresses passes every per-destination budget, and the hourly cap of the channel lets N through and holds the rest unspent until the next hour', async () => {
    f.now = at(HOUR, 20 * 60)
    const caps: SendCaps = { perChannel: { email: 3 }, perCountry: {} }
    // The pump: a sign-up each for five different addresses (each far inside its own budget; a stranger's ask).
    const targets = Array.from({ length: 5 }, () => uniqueEmail('pumped'))
    const ids: string[] = []
    for (const target of targets) ids.push((await f.harness.enqueueStrangers(target, 7_200)).messageId)
    const provider = ok()
    const heldBefore = await heldMetric('email', 'channel')
    expect(await deliver(caps, provider)).to.equal(5)

    expect(provider.calls, 'the cap lets three through').to.have.length(3)
    const rows = await Promise.all(ids.map((id) => f.rows.message(id)))
    const held = rows.filter((row) => row.state === 'pending')
    expect(held, 'the other two are held').to.have.length(2)
    for (const row of held) {
      expect(row.attempt_count, 'a hold spends no attempt').to.equal(0)
      expect(await f.rows.attempts(row.id)).to.have.length(0)
      expect(row.available_at.getTime(), 'held until the hour ends').to.equal(at(HOUR, 3600).getTime())
      expect(await f.rows.queuedJob(row.id), 'its job waits for the next hour').to.be.an('object')
    }
    expect((await heldMetric('email', 'channel')) - heldBefore).to.equal(2)
    const warned = () =>
      f.logs
        .text()
        .split('\n')
        .filter((line) => line.includes('SEND CAP REACHED'))
    expect(warned(), 'the hold is logged once').to.have.length(1)
    for (const target of targets) expect(f.logs.text()).not.to.include(target.split('@')[0])

    // More pumping this hour is held too, and the hold is not logged again.
    f.now = at(HOUR, 30 * 60)
    const late = await f.harness.enqueueStrangers(uniqueEmail('pumped'), 7_200)
    await deliver(caps, provider)
    expect(provider.calls).to.have.length(3)
    expect(await f.rows.message(late.messageId)).to.include({ state: 'pending', attempt_count: 0 })
    expect(warned()).to.have.length(1)

    // The next hour has room: three more go, the rest wait again, none lost.
    f.now = at(HOUR, 3600 + 30)
    await deliver(caps, provider)
    expect(provider.calls).to.have.length(6)
    const states = await Promise.all([...ids, late.messageId].map(async (id) => (await f.rows.message(id)).state))
    expect(states.filter((state) => state === 'published')).to.have.length(6)
  })

  it('lets a held code expire unsent, dead-lettered challenge_expired, never sent late', async () => {
    f.now = at(HOUR, 20 * 60)
    const caps: SendCaps = { perChannel: { email: 1 }, perCountry: {} }
    const first = await f.harness.enqueueStrangers(uniqueEmail(), 600)
    const second = await f.harness.enqueueStrangers(uniqueEmail(), 600)
    const provider = ok()
    await deliver(caps, provider)
    expect(provider.calls).to.have.length(1)
    const [sent, held] = (await f.rows.message(first.messageId)).state === 'published' ? [first, second] : [second, first]
    expect(await f.rows.message(sent.messageId)).to.include({ state: 'published' })
    // Ten minutes of life and forty until the hour has room: it goes now, unsent.
    await f.rows.expectDeadLetteredUnsent(held.messageId, 'challenge_expired')
  })

  it('holds only the country whose cap is reached', async () => {
    f.now = at(HOUR, 20 * 60)
    const caps: SendCaps = { perChannel: {}, perCountry: { '44': 1 } }
    const uk = [phoneIn('44'), phoneIn('44')]
    const us = [phoneIn('1'), phoneIn('1')]
    const ids = new Map<string, string>()
    for (const phone of [...uk, ...us]) ids.set(phone, (await f.harness.enqueueStrangers(phone, 7_200)).messageId)
    const provider = ok()
    await deliver(caps, provider)

    const sentTo = provider.calls.map((call) => call.destination)
    expect(
      sentTo.filter((to) => to.startsWith('+44')),
      'one to the capped country',
    ).to.have.length(1)
    expect(
      sentTo.filter((to) => to.startsWith('+1')),
      'every other country unhindered',
    ).to.have.length(2)
    const heldUk = uk.find((phone) => !sentTo.includes(phone))!
    expect(await f.rows.message(ids.get(heldUk)!)).to.include({ state: 'pending', attempt_count: 0 })
    expect(await heldMetric('whatsapp', 'country')).to.be.at.least(1)
    const warning = f.logs
      .text()
      .split('\n')
      .find((line) => line.includes('SEND CAP REACHED'))!
    expect(warning).to.include('"callingCode":"44"')
    for (const phone of uk) expect(warning).not.to.include(phone.slice(3))
  })

  it('counts nothing and holds nothing when no cap is configured', async () => {
    f.now = at(HOUR, 20 * 60)
    for (let i = 0; i < 3; i++) await f.harness.enqueue(uniqueEmail(), 7_200)
    const provider = ok()
    await deliver({ perChannel: {}, perCountry: {} }, provider)
    expect(provider.calls).to.have.length(3)
    expect(await f.db.owner('outbox.send_windows')).to.have.length(0)
  })
})
