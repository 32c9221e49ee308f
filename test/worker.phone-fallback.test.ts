import { expect } from 'chai'
import { deliverBatch, deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import type { Channel } from '../src/outbox/constants.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { hashCode } from '../src/crypto/codes.ts'
import { fallBackToNextPhoneChannel } from '../src/identity/phone-fallback.ts'
import { messageHistoryRow } from '../src/outbox/staff-functions-sql.ts'
import { createSessionTx } from '../src/identity/sessions.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { assertChannelAvailable, deliveryChannelFor } from '../src/identity/challenges.ts'
import { ChannelUnavailableError } from '../src/identity/errors.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { createVerifiedIdentity, editMessageBypassingTrigger, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('the phone fallback: WhatsApp, then SMS, for one message', () => {
  const f = useOutboxFixture()
  const { message, attempts, deadLetter } = f.rows

  const sent = (id: string) => () => ({ providerMessageId: id })
  const noWhatsApp = () => new DeliveryFailureError('REJECTED', '131026', null, true, 'channel_unreachable')
  const expiredToken = () => new DeliveryFailureError('UNAVAILABLE', '190', null, false, 'provider_misconfigured')
  const whatsappCloud = (script: (call: number) => { providerMessageId: string } | Error) =>
    scriptedProvider(script, { id: 'whatsapp_cloud', channel: 'whatsapp' })
  const twilio = (script: (call: number) => { providerMessageId: string } | Error = sent('SM1')) =>
    scriptedProvider(script, { id: 'twilio', channel: 'sms' })
  const deps = (whatsapp: Provider[], sms: Provider[], phoneChannels?: Channel[]) => ({
    ...f.harness.deps({ whatsapp, sms }),
    ...(phoneChannels ? { phoneChannels } : {}),
  })
  const codeIn = (text: string) => /\b(\d{6})\b/.exec(text)?.[1]
  const path = async (messageId: string) => (await attempts(messageId)).map((row) => `${row.channel}/${row.provider}/${row.outcome}`)
  const holdDown = (provider: string, channel: Channel) =>
    f.db.owner('outbox.provider_states').insert({
      provider,
      channel,
      state: 'down',
      failure_streak: 5,
      last_failure_at: f.now,
      down_since: f.now,
      probe_interval_ms: 5_000,
      next_probe_at: new Date(f.now.getTime() + 60_000),
      updated_at: f.now,
    })
  const enqueuePhone = async () => (await f.harness.enqueue(uniquePhone())).messageId

  it('sends a number without WhatsApp its code by SMS at once, the same code in the same challenge, and records both channels', async () => {
    const id = await enqueuePhone()
    const whatsapp = whatsappCloud(noWhatsApp)
    const sms = twilio()
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    const after = await message(id)
    expect(after).to.include({ state: 'pending', attempt_count: 1 })
    expect(after.available_at.getTime(), 'no back-off').to.be.at.most(f.now.getTime())

    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    expect(await message(id)).to.include({ state: 'published', attempt_count: 2 })
    expect(await path(id)).to.deep.equal(['whatsapp/whatsapp_cloud/retryable_error', 'sms/twilio/published'])
    expect(whatsapp.calls).to.have.length(1)
    expect(sms.calls).to.have.length(1)
    expect(sms.calls[0]!.destination, 'the same destination').to.equal(whatsapp.calls[0]!.destination)
    expect(codeIn(sms.calls[0]!.text), 'the same code').to.equal(codeIn(whatsapp.calls[0]!.text)).and.not.equal(undefined)
  })

  it('never goes back to WhatsApp for that message once it proved unable to reach the number', async () => {
    const id = await enqueuePhone()
    const whatsapp = whatsappCloud(noWhatsApp)
    // SMS is briefly unavailable: the retry after it must go to SMS again, not back to WhatsApp.
    const sms = twilio((call) => (call === 1 ? new DeliveryFailureError('UNAVAILABLE', '503') : { providerMessageId: 'SM2' }))
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    expect(whatsapp.calls).to.have.length(1)
    expect(await path(id)).to.deep.equal(['whatsapp/whatsapp_cloud/retryable_error', 'sms/twilio/retryable_error', 'sms/twilio/published'])
  })

  it('sends the code by SMS at once while the WhatsApp provider is held down, no attempt spent waiting on WhatsApp', async () => {
    await holdDown('whatsapp_cloud', 'whatsapp')
    const id = await enqueuePhone()
    const whatsapp = whatsappCloud(sent('wamid.1'))
    const sms = twilio()
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    expect(whatsapp.calls).to.have.length(0)
    expect(await message(id)).to.include({ state: 'published', attempt_count: 1 })
    expect(await path(id)).to.deep.equal(['sms/twilio/published'])
  })

  it('spends no attempt on a provider that refuses our own settings, holds it down at once and sends by SMS', async () => {
    const id = await enqueuePhone()
    const whatsapp = whatsappCloud(expiredToken)
    const sms = twilio()
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    expect(await message(id)).to.include({ state: 'pending', attempt_count: 0 })
    expect(await attempts(id)).to.have.length(0)
    expect(await f.db.owner('outbox.provider_states').where({ provider: 'whatsapp_cloud' }).first()).to.include({ state: 'down' })
    expect(f.logs.text()).to.match(/MISCONFIGURATION: the provider refused/)
    expect(f.logs.text()).to.match(/PROVIDER HELD DOWN/)

    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    expect(whatsapp.calls).to.have.length(1)
    expect(await path(id)).to.deep.equal(['sms/twilio/published'])
  })

  it('never fails over a REJECTED without an effect: the message is dead-lettered and SMS is not tried', async () => {
    const id = await enqueuePhone()
    const sms = twilio()
    await deliverOne(deps([whatsappCloud(() => new DeliveryFailureError('REJECTED', '131000'))], [sms]), await f.harness.nextJob())
    expect(sms.calls).to.have.length(0)
    expect(await deadLetter(id)).to.include({ reason: 'provider_rejected' })
  })

  it('dead-letters a number without WhatsApp as REJECTED when no phone channel is left (no SMS provider, or PHONE_CHANNELS=whatsapp)', async () => {
    const withoutSms = await enqueuePhone()
    await deliverOne(deps([whatsappCloud(noWhatsApp)], []), await f.harness.nextJob())
    expect(await deadLetter(withoutSms)).to.include({ reason: 'provider_rejected', last_failure_class: 'REJECTED' })

    const whatsappOnly = await enqueuePhone()
    const sms = twilio()
    await deliverOne(deps([whatsappCloud(noWhatsApp)], [sms], ['whatsapp']), await f.harness.nextJob())
    expect(await deadLetter(whatsappOnly)).to.include({ reason: 'provider_rejected' })
    expect(sms.calls).to.have.length(0)
  })

  it('counts a message sent by SMS against the sms send cap, not the whatsapp one', async () => {
    await holdDown('whatsapp_cloud', 'whatsapp')
    // Strangers' codes, which a cap holds (owners' are never held).
    const ids = [(await f.harness.enqueueStrangers(uniquePhone())).messageId, (await f.harness.enqueueStrangers(uniquePhone())).messageId]
    const sms = twilio()
    const capped = { ...deps([whatsappCloud(sent('wamid.1'))], [sms]), sendCaps: { perChannel: { sms: 1, whatsapp: 100 }, perCountry: {} } }
    await deliverBatch(capped, [await f.harness.nextJob(), await f.harness.nextJob()])
    expect(sms.calls, 'one slot of the sms cap').to.have.length(1)
    const states = (await Promise.all(ids.map(message))).map((row) => row.state).sort()
    expect(states).to.deep.equal(['pending', 'published'])
    const windows = await f.db.owner('outbox.send_windows').select('channel', 'sent')
    expect(windows.map((row) => row.channel)).to.deep.equal(['sms'])
  })

  it('refuses the edited-destination attack on the fallback: a phone message pointed at another number does not open for SMS either', async () => {
    await holdDown('whatsapp_cloud', 'whatsapp')
    const id = await enqueuePhone()
    await editMessageBypassingTrigger(f.db.owner, id, { destination: uniquePhone() })
    const sms = twilio()
    await deliverOne(deps([whatsappCloud(sent('wamid.1'))], [sms]), await f.harness.nextJob())
    expect(sms.calls, 'nothing was sent to the edited number').to.have.length(0)
    expect(await deadLetter(id)).to.include({ reason: 'decryption_failed' })
  })

  it("shows staff the path a code took: each attempt's channel and provider (whatsapp_cloud on whatsapp, then twilio on sms)", async () => {
    const id = await enqueuePhone()
    const whatsapp = whatsappCloud(noWhatsApp)
    const sms = twilio()
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    await deliverOne(deps([whatsapp], [sms]), await f.harness.nextJob())
    const staffEmail = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, staffEmail)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(staffEmail)!, 'test', new Date())
    const { token } = await f.harness.api.transaction((trx) => createSessionTx(trx, identityId, new Date()))
    const history = await messageHistoryRow(f.harness.api, hashToken(token), id)
    expect(history!.message).to.include({ channel: 'whatsapp', state: 'published' })
    expect(history!.attempts.map((attempt) => [attempt.provider, attempt.channel, attempt.outcome])).to.deep.equal([
      ['whatsapp_cloud', 'whatsapp', 'retryable_error'],
      ['twilio', 'sms', 'published'],
    ])
  })

  describe('after a failed WhatsApp status (the asynchronous fallback the web runs)', () => {
    const webDeps = () => ({
      boss: f.harness.webBoss,
      outboxKey: f.keys.outboxKey,
      codeHashKey: f.keys.codeHashKey,
      channels: new Set<Channel>(['email', 'whatsapp', 'sms']),
      clock: () => f.now,
      logger: f.logs.logger,
    })
    /** A phone code sent by WhatsApp and accepted: published, its ciphertext gone. */
    const publishedOnWhatsApp = async () => {
      const id = await enqueuePhone()
      const whatsapp = whatsappCloud(sent('wamid.1'))
      await deliverOne(deps([whatsapp], [twilio()]), await f.harness.nextJob())
      expect(await message(id)).to.include({ state: 'published' })
      return { id, code: codeIn(whatsapp.calls[0]!.text)!, challengeId: (await message(id)).challenge_id as string }
    }
    const challenge = (challengeId: string) => f.db.owner('identity.challenges').where({ id: challengeId }).first()
    const messagesOf = (challengeId: string) =>
      f.db.owner('outbox.security_outbox_messages').where({ challenge_id: challengeId }).orderBy('id')

    it('sends a new code for the same challenge by SMS: the old code stops verifying, the new one verifies, the expiry is the same', async () => {
      const { id, code: oldCode, challengeId } = await publishedOnWhatsApp()
      const before = await challenge(challengeId)
      const fallback = await fallBackToNextPhoneChannel(f.harness.api, webDeps(), id)
      expect(fallback).to.include({ fellBackTo: 'sms' })
      const [, next] = await messagesOf(challengeId)
      expect(next).to.include({ channel: 'sms', state: 'pending', destination: (await message(id)).destination })

      const sms = twilio()
      await deliverOne(deps([], [sms]), await f.harness.nextJob())
      expect(await message(next.id)).to.include({ state: 'published' })
      const newCode = codeIn(sms.calls[0]!.text)!
      const after = await challenge(challengeId)
      expect(after.expires_at.getTime(), 'the same validity').to.equal(before.expires_at.getTime())
      expect(after.code_hash.equals(hashCode(f.keys.codeHashKey, challengeId, Buffer.from(newCode))), 'the new code verifies').to.equal(
        true,
      )
      expect(after.code_hash.equals(hashCode(f.keys.codeHashKey, challengeId, Buffer.from(oldCode))), 'the old code does not').to.equal(
        false,
      )
    })

    it('does nothing the second time: a replayed status event sends no third code', async () => {
      const { id, challengeId } = await publishedOnWhatsApp()
      await fallBackToNextPhoneChannel(f.harness.api, webDeps(), id)
      const hash = (await challenge(challengeId)).code_hash
      expect(await fallBackToNextPhoneChannel(f.harness.api, webDeps(), id)).to.deep.equal({ refused: 'newer_message_exists' })
      expect(await messagesOf(challengeId)).to.have.length(2)
      expect((await challenge(challengeId)).code_hash.equals(hash)).to.equal(true)
    })

    it('sends nothing once the challenge expired or was consumed, or when no phone channel is left', async () => {
      const expired = await publishedOnWhatsApp()
      f.now = new Date(f.now.getTime() + 8_000_000)
      expect(await fallBackToNextPhoneChannel(f.harness.api, webDeps(), expired.id)).to.deep.equal({ refused: 'challenge_expired' })
      f.now = new Date()

      const consumed = await publishedOnWhatsApp()
      await f.db.owner('identity.challenges').where({ id: consumed.challengeId }).update({ consumed_at: f.now })
      expect(await fallBackToNextPhoneChannel(f.harness.api, webDeps(), consumed.id)).to.deep.equal({ refused: 'challenge_consumed' })

      const whatsappOnly = await publishedOnWhatsApp()
      const noSms = { ...webDeps(), channels: new Set<Channel>(['email', 'whatsapp']) }
      expect(await fallBackToNextPhoneChannel(f.harness.api, noSms, whatsappOnly.id)).to.deep.equal({ refused: 'no_phone_channel_left' })
      for (const one of [expired, consumed, whatsappOnly]) expect(await messagesOf(one.challengeId)).to.have.length(1)
    })

    it('refuses a message whose code never went out on WhatsApp (still pending, or sent by SMS)', async () => {
      const pending = await enqueuePhone()
      expect(await fallBackToNextPhoneChannel(f.harness.api, webDeps(), pending)).to.deep.equal({ refused: 'not_published' })
      await holdDown('whatsapp_cloud', 'whatsapp')
      await deliverOne(deps([whatsappCloud(sent('wamid.1'))], [twilio()]), await f.harness.nextJob())
      expect(await fallBackToNextPhoneChannel(f.harness.api, webDeps(), pending)).to.deep.equal({ refused: 'not_sent_on_failed_channel' })
    })
  })
})

describe('PHONE_CHANNELS on the web: the channel a phone code is enqueued on', () => {
  const phone = { kind: 'phone' as const, value: '+4915112345678' }
  const on = (channels: Channel[], phoneChannels?: Channel[]) => ({
    channels: new Set(channels),
    ...(phoneChannels ? { phoneChannels } : {}),
  })

  it('is the first phone channel of PHONE_CHANNELS the fleet has, WhatsApp first by default, the same for every number', () => {
    expect(deliveryChannelFor(on(['email', 'whatsapp', 'sms']), phone)).to.equal('whatsapp')
    expect(deliveryChannelFor(on(['email', 'sms']), phone), 'no WhatsApp in the fleet').to.equal('sms')
    expect(deliveryChannelFor(on(['email', 'whatsapp', 'sms'], ['sms', 'whatsapp']), phone)).to.equal('sms')
    expect(deliveryChannelFor(on(['email', 'whatsapp', 'sms'], ['sms']), phone), 'PHONE_CHANNELS=sms').to.equal('sms')
    expect(deliveryChannelFor(on(['email', 'whatsapp', 'sms'], ['whatsapp']), phone), 'PHONE_CHANNELS=whatsapp').to.equal('whatsapp')
    expect(deliveryChannelFor(on(['email', 'sms']), { kind: 'email', value: 'a@example.com' })).to.equal('email')
  })

  it('refuses a phone identifier only while no listed phone channel exists', () => {
    expect(() => assertChannelAvailable(on(['email', 'sms']), phone)).not.to.throw()
    expect(() => assertChannelAvailable(on(['email', 'sms'], ['whatsapp']), phone)).to.throw(ChannelUnavailableError)
    expect(() => assertChannelAvailable(on(['email']), phone)).to.throw(ChannelUnavailableError)
  })
})
