import { expect } from 'chai'
import twilioLibrary from 'twilio'
import { twilioSignature } from '../src/providers/twilio/signature.ts'
import { destinationHmac } from '../src/outbox/destination.ts'
import { STACK_WORKER_ID } from './support/channels.ts'
import { eventually, uniquePhone } from './support/helpers.ts'
import { sendRaw } from './support/raw-http.ts'
import { enqueueSmsCode } from './support/sms-messages.ts'
import { TWILIO_STACK, useWebStack } from './support/web-stack.ts'

const form = (params: [string, string][]) => new URLSearchParams(params).toString()

describe('Twilio status callbacks (POST /webhooks/twilio)', () => {
  const f = useWebStack({
    sms: true,
    webhooks: { TWILIO_AUTH_TOKEN: TWILIO_STACK.authToken, PUBLIC_BASE_URL: TWILIO_STACK.publicBaseUrl },
  })
  const twilio = () => f.stack.twilio!

  /** An SMS code delivered to `phone` through the real worker and the fake Twilio: its message id and Twilio's sid. */
  async function sentSms(phone = uniquePhone()) {
    const { messageId } = await enqueueSmsCode(f.db, f.keys, f.logs.logger, phone)
    const attempt = await eventually(
      () =>
        f.db
          .owner('outbox.security_outbox_attempts')
          .where({ message_id: messageId, provider: 'twilio' })
          .whereNotNull('provider_message_id')
          .first<{ provider_message_id: string } | undefined>('provider_message_id'),
      'the SMS accepted by Twilio',
    )
    return { phone, messageId, sid: attempt.provider_message_id }
  }

  /** Posts a callback to the web as the public proxy in front of it would, with the headers given. */
  const post = (params: [string, string][], headers: Record<string, string>) =>
    sendRaw(f.stack.web.url, {
      method: 'POST',
      path: '/webhooks/twilio',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: form(params),
    })
  const events = (messageId: string) =>
    f.db.owner('outbox.security_outbox_delivery_events').where({ message_id: messageId }).orderBy('id').select('event', 'subtype')
  const suppressions = () => f.db.owner('outbox.suppressed_destinations').select('destination_hmac', 'channel', 'reason')

  it('a forged callback (signed with another auth token) is refused and nothing is written', async () => {
    const message = await sentSms()
    const callback = twilio().statusCallback(message.sid, 'undelivered', 30005)
    const answer = await post(callback.params, { 'x-twilio-signature': twilioSignature('a-guessed-token', callback.url, callback.params) })
    expect(answer.status).to.equal(403)
    expect(JSON.parse(answer.text)).to.include({ code: 'invalid_signature' })
    expect(await events(message.messageId)).to.have.length(0)
    expect(await suppressions()).to.have.length(0)
  })

  it('a callback without a signature, or with a tampered parameter, is refused and nothing is written', async () => {
    const message = await sentSms()
    const callback = twilio().statusCallback(message.sid, 'undelivered', 30007)
    expect((await post(callback.params, {})).status).to.equal(403)
    const tampered = callback.params.map(([name, value]): [string, string] => [name, name === 'ErrorCode' ? '30005' : value])
    expect((await post(tampered, { 'x-twilio-signature': callback.signature })).status).to.equal(403)
    expect(await events(message.messageId)).to.have.length(0)
    expect(await suppressions()).to.have.length(0)
  })

  it("a callback signed over the URL the attacker's Host header names is refused: the URL is PUBLIC_BASE_URL's", async () => {
    const message = await sentSms()
    const callback = twilio().statusCallback(message.sid, 'undelivered', 30005)
    for (const host of ['attacker.example', new URL(f.stack.web.url).host]) {
      const spoofed = twilioSignature(TWILIO_STACK.authToken, `https://${host}/webhooks/twilio`, callback.params)
      const answer = await post(callback.params, { host, 'x-forwarded-host': host, 'x-twilio-signature': spoofed })
      expect(answer.status, host).to.equal(403)
    }
    expect(await events(message.messageId)).to.have.length(0)
    expect(await suppressions()).to.have.length(0)
  })

  it('a good callback is stored, and its replay is stored once', async () => {
    const message = await sentSms()
    const first = await twilio().sendStatus(message.sid, 'delivered', { via: f.stack.web.url })
    expect(first).to.deep.equal({ status: 200, body: { outcome: 'stored' } })
    const callback = twilio().statusCallback(message.sid, 'delivered')
    const replay = await post(callback.params, { 'x-twilio-signature': callback.signature })
    expect(JSON.parse(replay.text)).to.deep.equal({ outcome: 'duplicate' })
    expect(await events(message.messageId)).to.deep.equal([{ event: 'delivered', subtype: null }])
  })

  it('a callback Twilio signed over the URL with its default port (:443) is stored, as twilio-node accepts it (item 9)', async () => {
    const message = await sentSms()
    const callback = twilio().statusCallback(message.sid, 'delivered')
    const withPort = callback.url.replace('https://sealpost.example/', 'https://sealpost.example:443/')
    const form = Object.fromEntries(callback.params)
    const signature = twilioLibrary.getExpectedTwilioSignature(TWILIO_STACK.authToken, withPort, form)
    expect(twilioLibrary.validateRequest(TWILIO_STACK.authToken, signature, callback.url, form), 'twilio-node accepts it').to.equal(true)
    const answer = await post(callback.params, { 'x-twilio-signature': signature })
    expect([answer.status, JSON.parse(answer.text)]).to.deep.equal([200, { outcome: 'stored' }])
    expect(await events(message.messageId)).to.deep.equal([{ event: 'delivered', subtype: null }])
  })

  it('statuses that say nothing final are ignored, and a sid no attempt carries is unknown', async () => {
    const message = await sentSms()
    for (const status of ['queued', 'sent'])
      expect((await twilio().sendStatus(message.sid, status, { via: f.stack.web.url })).body).to.deep.equal({ outcome: 'ignored' })
    const callback = twilio().statusCallback(message.sid, 'delivered')
    const other = callback.params.map(([name, value]): [string, string] => [
      name,
      name.endsWith('Sid') && value === message.sid ? `SM${'0'.repeat(32)}` : value,
    ])
    const signed = twilioSignature(TWILIO_STACK.authToken, callback.url, other)
    expect(JSON.parse((await post(other, { 'x-twilio-signature': signed })).text)).to.deep.equal({ outcome: 'unknown_message' })
    expect(await events(message.messageId)).to.have.length(0)
  })

  it('30005 and 30006 suppress the exact number on every phone channel, and nothing else', async () => {
    const unknown = await sentSms()
    const landline = await sentSms()
    const bystander = await sentSms()
    await twilio().sendStatus(unknown.sid, 'undelivered', { errorCode: 30005, via: f.stack.web.url })
    await twilio().sendStatus(landline.sid, 'failed', { errorCode: 30006, via: f.stack.web.url })
    expect(await events(unknown.messageId)).to.deep.equal([{ event: 'bounced', subtype: 'undelivered/30005' }])
    expect(await events(landline.messageId)).to.deep.equal([{ event: 'rejected', subtype: 'failed/30006' }])
    const suppressed = (await suppressions()).map((row: { destination_hmac: Buffer }) => row.destination_hmac.toString('hex')).sort()
    const expected = [unknown.phone, landline.phone]
      .map((phone) => destinationHmac(f.keys.codeHashKey, 'whatsapp', phone).toString('hex'))
      .sort()
    expect(suppressed).to.deep.equal(expected)
    expect(expected).to.include(destinationHmac(f.keys.codeHashKey, 'sms', unknown.phone).toString('hex'))
    expect(suppressed).not.to.include(destinationHmac(f.keys.codeHashKey, 'sms', bystander.phone).toString('hex'))
    await f.db.owner('outbox.suppressed_destinations').delete()
  })

  it('30003, 30004, 30007 and 30008 are stored and suppress nothing: they prove nothing about the number', async () => {
    for (const code of [30003, 30004, 30007, 30008]) {
      const message = await sentSms()
      expect((await twilio().sendStatus(message.sid, 'undelivered', { errorCode: code, via: f.stack.web.url })).body).to.deep.equal({
        outcome: 'stored',
      })
      expect(await events(message.messageId)).to.deep.equal([{ event: 'bounced', subtype: `undelivered/${code}` }])
    }
    expect(await suppressions()).to.have.length(0)
  })

  it('end to end: an SMS code goes through the worker to Twilio, and its delivered callback is stored', async () => {
    const message = await sentSms()
    const sent = twilio()
      .accepted()
      .find((request) => request.sid === message.sid)!
    expect(sent).to.include({ to: message.phone, statusCallback: `${TWILIO_STACK.publicBaseUrl}/webhooks/twilio` })
    expect(sent.body).to.include('123456')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ id: message.messageId }).first()).to.include({
      state: 'published',
      channel: 'sms',
    })
    await twilio().sendStatus(message.sid, 'delivered', { via: f.stack.web.url })
    expect(await events(message.messageId)).to.deep.equal([{ event: 'delivered', subtype: null }])
    const metrics = await (await fetch(`${f.stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="twilio",outcome="stored",reason=""\} \d+/)
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="twilio",outcome="refused",reason="invalid_signature"\} \d+/)
    expect(f.logs.text()).not.to.include(message.phone)
    // The worker with the Twilio connector announced the sms channel itself (not only the stack's stand-in registration).
    const registrations = await f.db.owner('outbox.delivery_channel_registrations').whereNot({ worker_id: STACK_WORKER_ID })
    expect(registrations.map((row: { channels: string[]; providers: string[] }) => [row.channels, row.providers])).to.deep.include([
      ['email', 'whatsapp', 'sms'],
      ['ses', 'wasender', 'twilio'],
    ])
  })
})
