import { createHmac } from 'node:crypto'
import { expect } from 'chai'
import { eventually, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const APP_SECRET = 'cloud-app-secret-for-tests'
const VERIFY_TOKEN = 'cloud-verify-token-for-tests'

describe('WhatsApp through the Cloud API: a code sent by the worker, and its webhooks (GET and POST /webhooks/whatsapp-cloud)', () => {
  const f = useWebStack({
    whatsappCloud: true,
    sms: true,
    webhooks: { WHATSAPP_CLOUD_APP_SECRET: APP_SECRET, WHATSAPP_CLOUD_VERIFY_TOKEN: VERIFY_TOKEN },
  })
  before(() => f.stack.cloud.subscribe(`${f.stack.web.url}/webhooks/whatsapp-cloud`, APP_SECRET))
  /** The codes the phone fallback enqueued for a number: new messages on the sms channel. */
  const fallbacksTo = (phone: string) =>
    f.db.owner('outbox.security_outbox_messages').where({ destination: phone, channel: 'sms' }).select('id')

  const handshake = (query: Record<string, string>) =>
    f.stack.call('GET', `/webhooks/whatsapp-cloud?${new URLSearchParams(query).toString()}`)
  const post = (raw: string, signature?: string) =>
    f.stack.call('POST', '/webhooks/whatsapp-cloud', raw, signature === undefined ? {} : { 'x-hub-signature-256': signature })
  const eventsOf = (messageId: string) =>
    f.db.owner('outbox.security_outbox_delivery_events').where({ message_id: messageId }).orderBy('id').select('event', 'subtype')

  async function publishedWhatsApp(phone: string) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: phone, password: 'correct horse battery' })).status).to.equal(202)
    return await eventually(
      () =>
        f.db
          .owner('outbox.security_outbox_messages as m')
          .join('outbox.security_outbox_attempts as a', 'a.message_id', 'm.id')
          .where({ 'm.destination': phone, 'm.state': 'published' })
          .first<{ id: string; provider_message_id: string } | undefined>('m.id', 'a.provider_message_id'),
      'the WhatsApp message published',
    )
  }

  it('delivers a phone sign-up through the real worker as the authentication template whose code confirms the sign-up', async () => {
    const phone = uniquePhone()
    const password = 'correct horse battery'
    expect((await f.stack.call('POST', '/sign-ups', { identifier: phone, password })).status).to.equal(202)
    const sent = await eventually(async () => f.stack.cloud.accepted().find((request) => request.to === phone), 'the Cloud API send')
    const { template } = sent.body as { template: { name: string; components: { parameters: { text: string }[] }[] } }
    expect(template.name).to.equal('stack_code')
    const [bodyCode, buttonCode] = template.components.map((component) => component.parameters[0]!.text)
    expect(bodyCode).to.match(/^\d{6}$/)
    expect(buttonCode).to.equal(bodyCode)
    expect(f.stack.phoneInbox.list().find((entry) => entry.to === phone)?.text).to.include(bodyCode)
    const confirmed = await f.stack.call('POST', '/sign-ups/confirmation', { identifier: phone, code: bodyCode, password })
    expect(confirmed.status).to.equal(201)
  })

  it('a number without WhatsApp: the Cloud API answers 131026 and the same code goes by SMS through the fake Twilio, and confirms the sign-up', async () => {
    const phone = uniquePhone()
    const password = 'correct horse battery'
    f.stack.cloud.behave((_call, request) => (request.to === phone ? { kind: 'error', code: 131026, status: 400 } : { kind: 'accept' }))
    try {
      expect((await f.stack.call('POST', '/sign-ups', { identifier: phone, password })).status).to.equal(202)
      const sms = await eventually(
        async () => f.stack.phoneInbox.list().find((entry) => entry.provider === 'twilio' && entry.to === phone),
        'the code by SMS',
      )
      expect(
        f.stack.cloud.accepted().some((request) => request.to === phone),
        'nothing accepted by WhatsApp',
      ).to.equal(false)
      // The SMS is recorded once the fake answered: wait for the record, not just the send.
      const attempts = await eventually(async () => {
        const rows = await f.db
          .owner('outbox.security_outbox_attempts as a')
          .join('outbox.security_outbox_messages as m', 'm.id', 'a.message_id')
          .where({ 'm.destination': phone })
          .orderBy('a.attempt_no')
          .select('m.channel as sealedFor', 'a.channel', 'a.provider', 'a.outcome')
        return rows.length === 2 ? rows : undefined
      }, 'both attempts recorded')
      expect(attempts).to.deep.equal([
        { sealedFor: 'whatsapp', channel: 'whatsapp', provider: 'whatsapp_cloud', outcome: 'retryable_error' },
        { sealedFor: 'whatsapp', channel: 'sms', provider: 'twilio', outcome: 'published' },
      ])
      const code = /\b(\d{6})\b/.exec(sms.text)?.[1]
      expect(code, 'a code in the SMS').to.be.a('string')
      expect((await f.stack.call('POST', '/sign-ups/confirmation', { identifier: phone, code, password })).status).to.equal(201)
    } finally {
      f.stack.cloud.behave(() => ({ kind: 'accept' }))
    }
  })

  it('while the WhatsApp provider is held down, a code goes by SMS at once through the fake Twilio', async () => {
    const phone = uniquePhone()
    await f.db
      .owner('outbox.provider_states')
      .insert({
        provider: 'whatsapp_cloud',
        channel: 'whatsapp',
        state: 'down',
        failure_streak: 5,
        last_failure_at: new Date(),
        down_since: new Date(),
        probe_interval_ms: 600_000,
        next_probe_at: new Date(Date.now() + 600_000),
      })
      .onConflict('provider')
      .merge()
    try {
      expect((await f.stack.call('POST', '/sign-ups', { identifier: phone, password: 'correct horse battery' })).status).to.equal(202)
      await eventually(
        async () => f.stack.phoneInbox.list().find((entry) => entry.provider === 'twilio' && entry.to === phone),
        'the code by SMS',
      )
      expect(
        f.stack.cloud.requests.some((request) => request.to === phone),
        'no WhatsApp send while held down',
      ).to.equal(false)
    } finally {
      await f.db.owner('outbox.provider_states').where({ provider: 'whatsapp_cloud' }).delete()
    }
  })

  it('answers the subscription handshake with the challenge only for the verify token', async () => {
    const good = await handshake({ 'hub.mode': 'subscribe', 'hub.verify_token': VERIFY_TOKEN, 'hub.challenge': '1158201444' })
    expect(good.status).to.equal(200)
    expect(good.headers.get('content-type')).to.match(/^text\/plain/)
    expect(good.body, 'the challenge, echoed').to.equal(1158201444)
    const refusals: Record<string, string>[] = [
      { 'hub.mode': 'subscribe', 'hub.verify_token': `${VERIFY_TOKEN}x`, 'hub.challenge': '1' },
      { 'hub.mode': 'unsubscribe', 'hub.verify_token': VERIFY_TOKEN, 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.verify_token': VERIFY_TOKEN, 'hub.challenge': '<script>' },
    ]
    for (const query of refusals) {
      const refused = await handshake(query)
      expect(refused.status, JSON.stringify(query)).to.equal(403)
      expect(refused.body?.code).to.equal('invalid_verify_token')
    }
  })

  it('a forged status (wrong, missing or other-secret signature) stores nothing and calls no fallback', async () => {
    const phone = uniquePhone()
    const message = await publishedWhatsApp(phone)
    const { raw, signature } = f.stack.cloud.signedStatuses([
      { id: message.provider_message_id, status: 'failed', recipient: phone, code: 131026 },
    ])
    const otherSecret = `sha256=${createHmac('sha256', 'not-the-app-secret').update(raw).digest('hex')}`
    const tampered = raw.replace('131026', '131027')
    for (const [body, header] of [
      [raw, otherSecret],
      [raw, undefined],
      [raw, signature.replace('sha256=', 'sha1=')],
      [tampered, signature],
    ] as const) {
      const answer = await post(body, header)
      expect(answer.status, String(header)).to.equal(403)
      expect(answer.body?.code).to.equal('invalid_signature')
    }
    expect(await eventsOf(message.id)).to.deep.equal([])
    expect(await fallbacksTo(phone)).to.deep.equal([])
    const metrics = await (await fetch(`${f.stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="whatsapp_cloud",outcome="refused",reason="invalid_signature"\} 4/)
  })

  it('stores delivered, read and failed statuses once each, signed as Meta signs them, and ignores sent', async () => {
    const phone = uniquePhone()
    const message = await publishedWhatsApp(phone)
    const at = new Date()
    expect(await f.stack.cloud.postStatuses([{ id: message.provider_message_id, status: 'sent', recipient: phone, at }])).to.equal(200)
    expect(await f.stack.cloud.postStatuses([{ id: message.provider_message_id, status: 'delivered', recipient: phone, at }])).to.equal(200)
    const read = f.stack.cloud.signedStatuses([{ id: message.provider_message_id, status: 'read', recipient: phone, at }])
    expect((await post(read.raw, read.signature)).body).to.deep.equal({ outcomes: ['stored'] })
    expect((await post(read.raw, read.signature)).body, 'the replay').to.deep.equal({ outcomes: ['duplicate'] })
    const stale = f.stack.cloud.signedStatuses([
      { id: message.provider_message_id, status: 'failed', recipient: phone, code: 131000, at: new Date(Date.now() - 8 * 24 * 3600_000) },
    ])
    expect((await post(stale.raw, stale.signature)).body, 'older than the replay window').to.deep.equal({ outcomes: ['ignored'] })
    expect(await eventsOf(message.id)).to.deep.equal([
      { event: 'delivered', subtype: null },
      { event: 'delivered', subtype: 'read' },
    ])
  })

  it('accepts a signed webhook of up to 3 MB and stores every status in it, far past the first hundred (item 8)', async () => {
    const phone = uniquePhone()
    const message = await publishedWhatsApp(phone)
    // Meta batches statuses; `sent` ones say nothing new and are skipped without a write.
    const filler = Array.from({ length: 25_000 }, (_, i) => ({ id: `wamid.filler${i}`, status: 'sent' as const, recipient: phone }))
    const { raw, signature } = f.stack.cloud.signedStatuses([
      ...filler,
      { id: message.provider_message_id, status: 'delivered', recipient: phone },
    ])
    expect(raw.length, 'the body').to.be.within(2_000_000, 3_000_000)
    const answer = await post(raw, signature)
    expect([answer.status, answer.body]).to.deep.equal([200, { outcomes: ['stored'] }])
    expect(await eventsOf(message.id)).to.deep.equal([{ event: 'delivered', subtype: null }])
  })

  it('hands a failed 131026 (no WhatsApp) to the phone fallback once: a new code by SMS through the fake Twilio, and never suppresses the number', async () => {
    const phone = uniquePhone()
    const message = await publishedWhatsApp(phone)
    const failed = f.stack.cloud.signedStatuses([{ id: message.provider_message_id, status: 'failed', recipient: phone, code: 131026 }])
    expect((await post(failed.raw, failed.signature)).body).to.deep.equal({ outcomes: ['stored'] })
    expect((await post(failed.raw, failed.signature)).body).to.deep.equal({ outcomes: ['duplicate'] })
    expect(await fallbacksTo(phone), 'one new code, not one per delivery of the status').to.have.length(1)
    await eventually(
      async () => f.stack.phoneInbox.list().find((entry) => entry.provider === 'twilio' && entry.to === phone),
      'the fallback code delivered by SMS',
    )
    expect(await eventsOf(message.id)).to.deep.equal([{ event: 'rejected', subtype: 'WA131026' }])
    expect(await f.db.owner('outbox.suppressed_destinations').where({ message_id: message.id })).to.have.length(0)
  })

  it('does not call the fallback for a failure about anything but reachability', async () => {
    const phone = uniquePhone()
    const message = await publishedWhatsApp(phone)
    expect(
      await f.stack.cloud.postStatuses([{ id: message.provider_message_id, status: 'failed', recipient: phone, code: 131000 }]),
    ).to.equal(200)
    expect(await eventsOf(message.id)).to.deep.equal([{ event: 'rejected', subtype: 'WA131000' }])
    expect(await fallbacksTo(phone)).to.deep.equal([])
  })

  it('refuses a signed body that is not JSON as malformed, storing nothing', async () => {
    const raw = 'not json'
    const answer = await post(raw, `sha256=${createHmac('sha256', APP_SECRET).update(raw).digest('hex')}`)
    expect(answer.status).to.equal(400)
    expect(answer.body?.code).to.equal('malformed')
  })
})
