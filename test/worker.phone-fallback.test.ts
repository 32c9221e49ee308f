import { expect } from 'chai'
import { deliverBatch, deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/delivery/provider.ts'
import type { Channel } from '../src/outbox/constants.ts'
import { editMessageBypassingTrigger, uniquePhone } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
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
    const ids = [await enqueuePhone(), await enqueuePhone()]
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
})
