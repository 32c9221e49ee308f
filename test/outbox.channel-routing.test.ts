import { expect } from 'chai'
import {
  carriersOf,
  carryingChannels,
  enqueueChannel,
  nextPhoneChannel,
  offersChannel,
  type ChannelRouting,
} from '../src/outbox/channel-routing.ts'
import type { Channel } from '../src/outbox/constants.ts'

describe('phone routing, the one rule (PHONE_CHANNELS as an ordered allow-list)', () => {
  const fleet = (...channels: Channel[]) => ({ has: (channel: Channel) => channels.includes(channel), registered: true })
  const routing = (phoneChannels: Channel[] | undefined, ...channels: Channel[]): ChannelRouting => ({
    ...(phoneChannels ? { phoneChannels } : {}),
    channels: fleet(...channels),
  })

  it('enqueues a phone code on the first listed channel the fleet has, and never on an unlisted one', () => {
    expect(enqueueChannel(routing(['sms', 'whatsapp'], 'email', 'whatsapp', 'sms'), 'phone')).to.equal('sms')
    expect(enqueueChannel(routing(['sms', 'whatsapp'], 'email', 'whatsapp'), 'phone')).to.equal('whatsapp')
    // PHONE_CHANNELS=sms while the fleet's registrations still show old workers with WhatsApp only: refused, not WhatsApp.
    expect(enqueueChannel(routing(['sms'], 'email', 'whatsapp'), 'phone')).to.equal(undefined)
    expect(offersChannel(routing(['sms'], 'email', 'whatsapp'), 'whatsapp')).to.equal(false)
    expect(enqueueChannel(routing(undefined, 'email', 'whatsapp', 'sms'), 'phone'), 'unset: WhatsApp first').to.equal('whatsapp')
    expect(enqueueChannel(routing(undefined, 'email', 'sms'), 'phone')).to.equal('sms')
    expect(enqueueChannel(routing(['sms'], 'email', 'sms'), 'email')).to.equal('email')
    expect(enqueueChannel(routing(['sms'], 'sms'), 'email'), 'no worker with email').to.equal(undefined)
  })

  it("keeps a sender within its scope: a key scoped to WhatsApp is never enqueued on SMS, and stores that scope as the message's carriers", () => {
    expect(enqueueChannel(routing(['sms', 'whatsapp'], 'whatsapp', 'sms'), 'phone', ['whatsapp'])).to.equal('whatsapp')
    expect(enqueueChannel(routing(['sms', 'whatsapp'], 'sms'), 'phone', ['whatsapp'])).to.equal(undefined)
    expect(carriersOf(['email', 'whatsapp'])).to.deep.equal(['whatsapp'])
    expect(carriersOf(['sms'])).to.deep.equal(['sms'])
    expect(carriersOf(['email', 'sms', 'whatsapp']), 'every phone channel: nothing to bind').to.equal(undefined)
  })

  it('offers what the settings name until the first worker registers: email always, phone only as PHONE_CHANNELS lists it', () => {
    const firstBoot = (phoneChannels?: Channel[]): ChannelRouting => ({
      ...(phoneChannels ? { phoneChannels } : {}),
      channels: { has: () => false, registered: false },
    })
    expect(enqueueChannel(firstBoot(), 'email')).to.equal('email')
    expect(enqueueChannel(firstBoot(), 'phone'), 'unset: which phone channel the fleet will have is unknown').to.equal(undefined)
    expect(enqueueChannel(firstBoot(['sms', 'whatsapp']), 'phone')).to.equal('sms')
    expect(offersChannel(firstBoot(['sms']), 'whatsapp')).to.equal(false)
  })

  it('routes a queued phone message over its own channel and the listed ones after it, within its carriers', () => {
    expect(carryingChannels(['whatsapp', 'sms'], { channel: 'whatsapp' })).to.deep.equal(['whatsapp', 'sms'])
    expect(carryingChannels(['sms', 'whatsapp'], { channel: 'whatsapp' }), 'never one listed before it').to.deep.equal(['whatsapp'])
    expect(carryingChannels(undefined, { channel: 'whatsapp' })).to.deep.equal(['whatsapp', 'sms'])
    // Enqueued on WhatsApp before PHONE_CHANNELS=sms: it goes by SMS, never on its own unlisted channel.
    expect(carryingChannels(['sms'], { channel: 'whatsapp' })).to.deep.equal(['sms'])
    expect(carryingChannels(['whatsapp', 'sms'], { channel: 'whatsapp', carriers: ['whatsapp'] }), 'a scoped key').to.deep.equal([
      'whatsapp',
    ])
    expect(carryingChannels(['sms'], { channel: 'whatsapp', carriers: ['whatsapp'] }), 'scoped to an unlisted channel: none').to.deep.equal(
      [],
    )
    expect(carryingChannels(['whatsapp', 'sms'], { channel: 'whatsapp' }, new Set<Channel>(['whatsapp']))).to.deep.equal(['sms'])
    expect(carryingChannels(['whatsapp', 'sms'], { channel: 'email' })).to.deep.equal(['email'])
  })

  it('takes the asynchronous fallback to the next listed channel the fleet has, never an unlisted one', () => {
    expect(nextPhoneChannel(routing(['whatsapp', 'sms'], 'whatsapp', 'sms'), 'whatsapp')).to.equal('sms')
    expect(nextPhoneChannel(routing(['whatsapp'], 'whatsapp', 'sms'), 'whatsapp')).to.equal(undefined)
    expect(nextPhoneChannel(routing(['sms', 'whatsapp'], 'whatsapp', 'sms'), 'whatsapp')).to.equal(undefined)
  })
})
