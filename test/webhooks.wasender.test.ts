import { expect } from 'chai'
import { eventually, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const SECRET = 'wasender-webhook-secret-for-tests'

describe('Wasender message status webhook (POST /webhooks/wasender)', () => {
  const f = useWebStack({ webhooks: { WASENDER_WEBHOOK_SECRET: SECRET } })

  const post = (body: unknown, signature?: string) =>
    f.stack.call('POST', '/webhooks/wasender', body, signature === undefined ? {} : { 'x-webhook-signature': signature })
  const update = (id: string, status: number) => ({
    event: 'messages.update',
    sessionId: 'session',
    data: { update: { status }, key: { remoteJid: 'someone@s.whatsapp.net', id, fromMe: true } },
    timestamp: Date.now(),
  })

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

  it('refuses a status with a wrong or missing secret and stores nothing', async () => {
    const message = await publishedWhatsApp(uniquePhone())
    for (const signature of ['not-the-secret', `${SECRET}x`, undefined]) {
      const answer = await post(update(message.provider_message_id, 3), signature)
      expect(answer.status, String(signature)).to.equal(403)
      expect(answer.body?.code).to.equal('invalid_signature')
    }
    expect(await f.db.owner('outbox.security_outbox_delivery_events').where({ message_id: message.id })).to.have.length(0)
    const metrics = await (await fetch(`${f.stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="wasender",outcome="refused",reason="invalid_signature"\} 3/)
  })

  it('maps statuses to the same event names, once each, and ignores what says nothing new', async () => {
    const message = await publishedWhatsApp(uniquePhone())
    expect((await post(update(message.provider_message_id, 2), SECRET)).body).to.deep.equal({ outcomes: ['ignored'] })
    const delivered = update(message.provider_message_id, 3)
    expect((await post(delivered, SECRET)).body).to.deep.equal({ outcomes: ['stored'] })
    expect((await post(delivered, SECRET)).body).to.deep.equal({ outcomes: ['duplicate'] })
    expect((await post(update(message.provider_message_id, 0), SECRET)).body).to.deep.equal({ outcomes: ['stored'] })
    expect((await post(update('999999999', 3), SECRET)).body).to.deep.equal({ outcomes: ['unknown_message'] })
    const stored = await f.db
      .owner('outbox.security_outbox_delivery_events')
      .where({ message_id: message.id })
      .orderBy('id')
      .select('event', 'subtype')
    expect(stored).to.deep.equal([
      { event: 'delivered', subtype: null },
      { event: 'rejected', subtype: 'error' },
    ])
    expect(await f.db.owner('outbox.suppressed_destinations').where({ message_id: message.id })).to.have.length(0)
  })
})
