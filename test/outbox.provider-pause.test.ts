import { expect } from 'chai'
import { deliverOne } from './support/run-once.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { runOnce } from '../src/runtime/delivery-pipeline.ts'
import { cappedRetryAfter, throttleBackoff, type PausePolicy } from '../src/outbox/provider-pause.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

const YEAR_SECONDS = 31_536_000
const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000)

describe('provider pauses, as pure functions', () => {
  const now = new Date('2026-12-01T12:00:00Z')
  const policy = (random = 1): PausePolicy => ({ maxPauseSeconds: 300, random: () => random })

  it('cuts a Retry-After at the ceiling and ignores one in the past', () => {
    expect(cappedRetryAfter(at(now, YEAR_SECONDS), now, policy())).to.deep.equal(at(now, 300))
    expect(cappedRetryAfter(at(now, 45), now, policy())).to.deep.equal(at(now, 45))
    expect(cappedRetryAfter(at(now, -5), now, policy())).to.equal(null)
    expect(cappedRetryAfter(null, now, policy())).to.equal(null)
  })

  it('backs off a hint-less throttle 1 s, 2 s, 4 s… while it goes on, up to the ceiling, with equal jitter', () => {
    let pause = throttleBackoff(undefined, now, policy())!
    expect(pause).to.deep.equal({ pausedUntil: at(now, 1), throttleStreak: 1 })
    const seen: number[] = []
    for (let i = 0; i < 12; i++) {
      const later = pause.pausedUntil
      pause = throttleBackoff(pause, later, policy())!
      seen.push((pause.pausedUntil.getTime() - later.getTime()) / 1000)
    }
    expect(seen).to.deep.equal([2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300])
    expect(throttleBackoff(undefined, now, policy(0))!.pausedUntil).to.deep.equal(at(now, 0.5))
    expect(throttleBackoff({ pausedUntil: now, throttleStreak: 4 }, now, policy(0))!.pausedUntil).to.deep.equal(at(now, 8))
  })

  it('adds nothing while a pause runs, and starts over after a quiet minute', () => {
    expect(throttleBackoff({ pausedUntil: at(now, 3), throttleStreak: 2 }, now, policy())).to.equal(null)
    expect(throttleBackoff({ pausedUntil: at(now, -61), throttleStreak: 6 }, now, policy())).to.deep.equal({
      pausedUntil: at(now, 1),
      throttleStreak: 1,
    })
  })
})

describe('provider pauses, recorded by the worker', () => {
  const f = useOutboxFixture()
  const pause = async (provider = 'ses') =>
    (await f.db.owner('outbox.paused_providers').where({ provider }).first()) as
      { paused_until: Date; throttle_streak: number; channel: string } | undefined
  const enqueue = async () => await f.harness.enqueue(uniqueEmail(), 3_600)
  const throttled = (retryAfterAt: Date | null, as: { id: 'ses' | 'smtp'; channel: 'email' } = { id: 'ses', channel: 'email' }) =>
    scriptedProvider(() => new DeliveryFailureError('THROTTLED', 'TooManyRequestsException', retryAfterAt), as)
  const sent = (as: { id: 'ses' | 'smtp'; channel: 'email' }) => scriptedProvider((call) => ({ providerMessageId: `${as.id}-${call}` }), as)

  it('lets one Retry-After of a year pause the provider and its message for at most MAX_PROVIDER_PAUSE_SECONDS', async () => {
    const { messageId } = await enqueue()
    await deliverOne(f.harness.deps({ email: throttled(at(f.now, YEAR_SECONDS)) }), await f.harness.nextJob())

    expect(await pause()).to.include({ channel: 'email' })
    expect((await pause())!.paused_until.getTime()).to.equal(at(f.now, 300).getTime())
    const message = await f.rows.message(messageId)
    expect(message).to.include({ state: 'pending', attempt_count: 1 })
    expect(message.available_at.getTime(), 'the message retries within the cap, not after its expiry').to.be.at.most(
      at(f.now, 300).getTime(),
    )
    expect(await f.db.owner('outbox.provider_pauses'), "no channel is paused: the pause is the provider's").to.have.length(0)

    // A second such answer a minute later moves the end to its own ceiling, never past it.
    f.now = at(f.now, 60)
    await enqueue()
    await f.db.owner('outbox.paused_providers').update({ paused_until: at(f.now, -1) })
    await deliverOne(f.harness.deps({ email: throttled(at(f.now, YEAR_SECONDS)) }), await f.harness.nextJob())
    expect((await pause())!.paused_until.getTime()).to.equal(at(f.now, 300).getTime())
  })

  it("pauses only the provider that throttled: an SMTP relay's 452 (no Retry-After) leaves SES sending the channel's codes", async () => {
    const relay = throttled(null, { id: 'smtp', channel: 'email' })
    const ses = sent({ id: 'ses', channel: 'email' })
    const first = await enqueue()
    const second = await enqueue()
    await deliverOne(f.harness.deps({ email: [relay, ses] }), await f.harness.nextJob())
    expect(await pause('smtp'), 'the relay backs off').to.include({ throttle_streak: 1 })
    expect(await pause('ses')).to.equal(undefined)

    const secondJob = await f.harness.nextJob()
    expect(secondJob.data.messageId).to.equal(second.messageId)
    await deliverOne(f.harness.deps({ email: [relay, ses] }), secondJob)
    expect(relay.calls, 'the paused relay is not called').to.have.length(1)
    expect(await f.rows.message(second.messageId), 'SES took it at once').to.include({ state: 'published', attempt_count: 1 })
    expect((await f.rows.attempts(second.messageId)).map((row: { provider: string }) => row.provider)).to.deep.equal(['ses'])
    expect(await f.rows.message(first.messageId)).to.include({ state: 'pending', attempt_count: 1 })
  })

  it('honours a channel pause the previous release wrote, for every provider of the channel, without spending an attempt', async () => {
    const { messageId } = await enqueue()
    await f.db.owner('outbox.provider_pauses').insert({ channel: 'email', paused_until: at(f.now, 60) })
    const ses = sent({ id: 'ses', channel: 'email' })
    const relay = sent({ id: 'smtp', channel: 'email' })
    await deliverOne(f.harness.deps({ email: [ses, relay] }), await f.harness.nextJob())
    expect(ses.calls.length + relay.calls.length).to.equal(0)
    const message = await f.rows.message(messageId)
    expect(message).to.include({ state: 'pending', attempt_count: 0 })
    expect(message.available_at.getTime()).to.equal(at(f.now, 60).getTime())
  })

  it('backs SES off fleet-wide after a throttle without Retry-After, so the next message to it spends no attempt', async () => {
    await enqueue()
    const second = await enqueue()
    const provider = throttled(null)
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    const backedOff = (await pause())!
    expect(backedOff.throttle_streak).to.equal(1)
    expect(backedOff.paused_until.getTime()).to.be.within(at(f.now, 0.5).getTime(), at(f.now, 1).getTime())

    const secondJob = await f.harness.nextJob()
    expect(secondJob.data).to.deep.equal({ messageId: second.messageId })
    await deliverOne(f.harness.deps({ email: provider }), secondJob)
    expect(provider.calls, 'the paused provider is not called').to.have.length(1)
    expect(await f.rows.message(second.messageId)).to.include({ state: 'pending', attempt_count: 0 })

    // Still throttled once the pause has passed: the next pause is longer.
    f.now = new Date(backedOff.paused_until.getTime() + 10)
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(2)
    const grown = (await pause())!
    expect(grown.throttle_streak).to.equal(2)
    expect(grown.paused_until.getTime()).to.be.within(at(f.now, 1).getTime(), at(f.now, 2).getTime())
  })

  it('dead-letters a code unsent when the pause outlasts it, whether the claim meets the pause or the record does', async () => {
    // The claim: the channel is paused past the code's life (an hour), so it goes now; a shorter pause is waited out.
    const doomed = await enqueue()
    await f.db.owner('outbox.provider_pauses').insert({ channel: 'email', paused_until: at(f.now, 7_200) })
    const provider = throttled(at(f.now, 600))
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    await f.rows.expectDeadLetteredUnsent(doomed.messageId, 'challenge_expired')
    const waiting = await enqueue()
    await f.db.owner('outbox.provider_pauses').update({ paused_until: at(f.now, 600) })
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(await f.rows.message(waiting.messageId)).to.include({ state: 'pending', attempt_count: 0 })
    expect(provider.calls, 'no send into a pause').to.have.length(0)

    // The record: two codes of two minutes claimed together, one slot; the first send is throttled
    // for five minutes, so the second, held back without an attempt, is recorded dead.
    await f.db.owner('outbox.provider_pauses').del()
    await f.db.owner('pgboss.job').where({ name: QUEUES.delivery }).del()
    const first = await f.harness.enqueue(uniqueEmail(), 120)
    const second = await f.harness.enqueue(uniqueEmail(), 120)
    const jobs = [await f.harness.nextJob(), await f.harness.nextJob()]
    await runOnce(f.harness.deps({ email: provider }), jobs, { concurrency: 1 })
    expect(provider.calls).to.have.length(1)
    const [sentOne, held] =
      provider.calls[0]!.destination === (await f.rows.message(first.messageId)).destination ? [first, second] : [second, first]
    expect(await f.rows.message(sentOne.messageId)).to.include({ attempt_count: 1 })
    await f.rows.expectDeadLetteredUnsent(held.messageId, 'challenge_expired')
    expect(await f.rows.deadLetter(held.messageId)).to.include({ last_failure_class: 'THROTTLED' })
  })

  it('one person pauses WhatsApp for everyone with a pair rate limit: a throttle about one recipient, even with Retry-After, pauses nobody', async () => {
    const { messageId } = await f.harness.enqueue(uniquePhone(), 3_600)
    const pairLimited = scriptedProvider(() => new DeliveryFailureError('THROTTLED', 'meta_131056', at(f.now, 60), true), {
      id: 'whatsapp_cloud',
      channel: 'whatsapp',
    })
    await deliverOne(f.harness.deps({ whatsapp: pairLimited }), await f.harness.nextJob())
    expect(await f.db.owner('outbox.paused_providers')).to.have.length(0)
    expect(await f.rows.message(messageId), 'the message itself waits for its hint').to.include({ state: 'pending', attempt_count: 1 })
  })

  it('leaves Wasender unpaused by a 429 without hints (it documents Retry-After), the message on its own schedule', async () => {
    const { messageId } = await f.harness.enqueue(uniquePhone(), 3_600)
    const provider = scriptedProvider(() => new DeliveryFailureError('THROTTLED', 'http_429'), { id: 'wasender', channel: 'whatsapp' })
    await deliverOne(f.harness.deps({ whatsapp: provider }), await f.harness.nextJob())
    expect(await f.db.owner('outbox.paused_providers')).to.have.length(0)
    expect(await f.rows.message(messageId)).to.include({ state: 'pending', attempt_count: 1 })
  })
})
