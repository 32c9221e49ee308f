import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import type { SnsEnvelope } from '../src/providers/ses/sns-verifier.ts'
import { gauges } from '../src/platform/outbox-admin.ts'
import { devSnsSigner, sesEventMessage, type SnsSigner } from '../src/providers/ses/dev-sns-signer.ts'
import { eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:sealpost-ses-events'
const certDir = mkdtempSync(path.join(tmpdir(), 'sealpost-sns-'))

describe('SES delivery events through SNS (POST /webhooks/ses)', () => {
  let signer: SnsSigner
  const confirmed: string[] = []
  before(async () => {
    signer = await devSnsSigner(certDir)
  })
  // The web's clock runs ahead when a test moves it past the 30 s between two codes of one challenge.
  let ahead = 0
  const f = useWebStack({
    clock: () => new Date(Date.now() + ahead),
    webhooks: { SES_EVENTS_TOPIC_ARN: TOPIC, SNS_TEST_SIGNING_CERT: path.join(certDir, 'sns-test-signing-cert.pem') },
    confirmSubscription: async (url) => void confirmed.push(url),
  })

  const post = (envelope: SnsEnvelope | string, type = typeof envelope === 'string' ? 'Notification' : envelope.Type) =>
    f.stack.call('POST', '/webhooks/ses', typeof envelope === 'string' ? envelope : JSON.stringify(envelope), {
      'content-type': 'text/plain; charset=UTF-8',
      'x-amz-sns-message-type': type,
    })
  const notification = (message: string, options?: Parameters<SnsSigner['envelope']>[1], fields: Partial<SnsEnvelope> = {}) =>
    signer.envelope({ Type: 'Notification', TopicArn: TOPIC, Message: message, ...fields }, options)
  const events = async () => Number((await f.db.owner('outbox.security_outbox_delivery_events').count({ n: '*' }))[0]!.n)
  const suppressions = async () => Number((await f.db.owner('outbox.suppressed_destinations').count({ n: '*' }))[0]!.n)

  /** Signs up `email` and waits for its code to be published; returns the message and SES's message id. */
  async function published(email: string) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })).status).to.equal(202)
    return await eventually(async () => {
      const row = await f.db
        .owner('outbox.security_outbox_messages as m')
        .join('outbox.security_outbox_attempts as a', 'a.message_id', 'm.id')
        .where({ 'm.destination': email, 'm.state': 'published' })
        .first<{ id: string; provider_message_id: string; destination_hmac: Buffer } | undefined>(
          'm.id',
          'a.provider_message_id',
          'm.destination_hmac',
        )
      return row
    }, `the message to ${email} published`)
  }

  it('stores a permanent bounce once (sent twice), suppresses the address, and dead-letters the next code to it without a send', async () => {
    const email = uniqueEmail('bounce')
    const message = await published(email)
    const bounce = notification(sesEventMessage('bounce', message.provider_message_id, new Date(), email))
    const first = await post(bounce)
    expect(first.status).to.equal(200)
    expect(first.body).to.deep.equal({ outcome: 'stored' })
    expect((await post(bounce)).body, 'the same event again').to.deep.equal({ outcome: 'duplicate' })

    const stored = await f.db.owner('outbox.security_outbox_delivery_events').where({ message_id: message.id })
    expect(stored).to.have.length(1)
    expect(stored[0]).to.include({ event: 'bounced', subtype: 'Permanent/General' })
    const suppressed = await f.db.owner('outbox.suppressed_destinations').where({ message_id: message.id }).first()
    expect(suppressed).to.include({ reason: 'permanent_bounce', channel: 'email' })
    expect(suppressed.destination_hmac.equals(message.destination_hmac)).to.equal(true)
    expect(suppressed.masked_destination).to.not.include(email.split('@')[0])

    // The same address again: the new sign-up answers exactly as any other, and nothing is sent.
    ahead += 31_000
    const answer = await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })
    expect(answer.status).to.equal(202)
    expect(Object.keys(answer.body!)).to.deep.equal(['challengeExpiresAt'])
    const dead = await eventually(async () => {
      return await f.db
        .owner('outbox.security_outbox_dead_letters as d')
        .join('outbox.security_outbox_messages as m', 'm.id', 'd.message_id')
        .where({ 'm.destination': email })
        .first<{ reason: string; attempt_count: number } | undefined>('d.reason', 'm.attempt_count')
    }, 'the next message dead-lettered')
    expect(dead).to.deep.equal({ reason: 'destination_suppressed', attempt_count: 0 })
    expect(await inbox(f.stack.emulator.url, email)).to.have.length(1)

    // Only that address: the same mailbox under a +tag is another address, which nothing proved bounces.
    const [local, domain] = email.split('@')
    await published(`${local}+again@${domain}`)

    // Once the suppression is lifted (staff, DELETE /platform-admin/suppressions/:id), mail flows again.
    await f.db.owner.raw('DELETE FROM outbox.suppressed_destinations WHERE id = ?', [suppressed.id])
    ahead += 31_000
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })).status).to.equal(202)
    await eventually(
      async () => ((await inbox(f.stack.emulator.url, email)).length === 2 ? true : undefined),
      'the code after the lift sent',
    )
  })

  it('stores a transient bounce, a delivery, a reject and a delay as events only (SignatureVersion 1 and 2)', async () => {
    const email = uniqueEmail('transient')
    const message = await published(email)
    const before = await suppressions()
    for (const [kind, version] of [
      ['transient-bounce', '2'],
      ['delivery', '1'],
      ['reject', '1'],
      ['delay', '2'],
    ] as const) {
      const answer = await post(notification(sesEventMessage(kind, message.provider_message_id), { version }))
      expect(answer.body, kind).to.deep.equal({ outcome: 'stored' })
    }
    const stored = await f.db
      .owner('outbox.security_outbox_delivery_events')
      .where({ message_id: message.id })
      .orderBy('id')
      .select('event', 'subtype')
    expect(stored).to.deep.equal([
      { event: 'bounced', subtype: 'Transient/MailboxFull' },
      { event: 'delivered', subtype: null },
      { event: 'rejected', subtype: 'Bad content' },
      { event: 'delayed', subtype: 'MailboxFull' },
    ])
    expect(await suppressions()).to.equal(before)

    // Operators see them per purpose in the backlog answer and the web's metrics.
    const summary = await gauges(f.db.owner, new Date())
    expect(summary.deliveryEventsLast24h.sign_up?.delivered).to.equal(1)
    expect(summary.deliveryEventsLast24h.sign_up?.bounced).to.be.at.least(1)
    const metrics = await (await fetch(`${f.stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_delivery_events_last_24h\{purpose="sign_up",event="delivered"\} 1/)
  })

  it('refuses a tampered body, a foreign certificate host, an old timestamp and an unknown topic, storing nothing', async () => {
    const email = uniqueEmail('attack')
    const message = await published(email)
    const before = { events: await events(), suppressions: await suppressions() }
    const delivery = sesEventMessage('bounce', message.provider_message_id)
    const attempts: [string, SnsEnvelope, number, string][] = [
      [
        'tampered body',
        notification(sesEventMessage('delivery', message.provider_message_id), { tamper: { Message: delivery } }),
        403,
        'invalid_signature',
      ],
      [
        'tampered signature',
        notification(delivery, { tamper: { Signature: Buffer.alloc(256, 1).toString('base64') } }),
        403,
        'invalid_signature',
      ],
      [
        'certificate from another host',
        notification(delivery, {}, { SigningCertURL: 'https://sns.eu-west-1.amazonaws.com.attacker.test/cert.pem' }),
        403,
        'invalid_certificate_url',
      ],
      [
        'certificate over http',
        notification(delivery, {}, { SigningCertURL: 'http://sns.eu-west-1.amazonaws.com/cert.pem' }),
        403,
        'invalid_certificate_url',
      ],
      [
        'certificate from another region',
        notification(delivery, {}, { SigningCertURL: 'https://sns.us-east-1.amazonaws.com/cert.pem' }),
        403,
        'invalid_certificate_url',
      ],
      [
        'a message two hours old',
        notification(delivery, {}, { Timestamp: new Date(Date.now() - 2 * 3_600_000).toISOString() }),
        403,
        'stale_message',
      ],
      [
        'an unknown topic',
        notification(delivery, {}, { TopicArn: 'arn:aws:sns:eu-west-1:123456789012:someone-else' }),
        403,
        'unknown_topic',
      ],
      ['an unknown signature version', notification(delivery, {}, { SignatureVersion: '3' }), 403, 'invalid_signature'],
    ]
    for (const [what, envelope, status, code] of attempts) {
      const answer = await post(envelope)
      expect(answer.status, what).to.equal(status)
      expect(answer.body?.code, what).to.equal(code)
    }
    expect((await post('not json')).status).to.equal(400)
    expect((await post(notification(delivery), 'SubscriptionConfirmation')).status, 'header and body disagree').to.equal(400)
    expect({ events: await events(), suppressions: await suppressions() }).to.deep.equal(before)

    const metrics = await (await fetch(`${f.stack.web.url}/metrics`)).text()
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="ses",outcome="refused",reason="invalid_signature"\} 3/)
    expect(metrics).to.match(/sealpost_webhook_events_total\{provider="ses",outcome="refused",reason="stale_message"\} 1/)
  })

  it('accepts the last retries of SNS’s longest delivery policy (an hour), and stores their replays once (item 8)', async () => {
    const email = uniqueEmail('late')
    const message = await published(email)
    // Published an hour ago, retried by SNS at 3 600 s, with our clock a little ahead of AWS's.
    const late = notification(
      sesEventMessage('delivery', message.provider_message_id),
      {},
      {
        Timestamp: new Date(Date.now() - 3_650_000).toISOString(),
      },
    )
    expect((await post(late)).body).to.deep.equal({ outcome: 'stored' })
    expect((await post(late)).body, 'the same retry again').to.deep.equal({ outcome: 'duplicate' })
    expect(await f.db.owner('outbox.security_outbox_delivery_events').where({ message_id: message.id })).to.have.length(1)
  })

  it('answers 200 for an authentic event of a message it does not know, and stores nothing', async () => {
    const before = await events()
    const answer = await post(notification(sesEventMessage('bounce', '0100018c-unknown-message-id')))
    expect(answer.status).to.equal(200)
    expect(answer.body).to.deep.equal({ outcome: 'unknown_message' })
    expect((await post(notification(JSON.stringify({ eventType: 'Open', mail: { messageId: 'x' } })))).body).to.deep.equal({
      outcome: 'ignored',
    })
    expect(await events()).to.equal(before)
  })

  it('confirms a subscription only to its own topic, only through SNS’s own ConfirmSubscription URL', async () => {
    const subscribe = (url: string, topic = TOPIC) =>
      signer.envelope({
        Type: 'SubscriptionConfirmation',
        TopicArn: topic,
        Message: 'You have chosen to subscribe.',
        Token: 'token-1',
        SubscribeURL: url,
      })
    const good = `https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(TOPIC)}&Token=token-1`
    expect((await post(subscribe('https://attacker.test/?Action=ConfirmSubscription'))).body?.code).to.equal('invalid_subscribe_url')
    expect((await post(subscribe(good.replace('eu-west-1.amazonaws.com', 'eu-west-1.amazonaws.com.attacker.test')))).body?.code).to.equal(
      'invalid_subscribe_url',
    )
    expect((await post(subscribe(good, 'arn:aws:sns:eu-west-1:123456789012:someone-else'))).body?.code).to.equal('unknown_topic')
    expect((await post(subscribe(good), 'SubscriptionConfirmation')).body).to.deep.equal({ outcome: 'subscription_confirmed' })
    expect(confirmed).to.deep.equal([good])
    const unsubscribed = signer.envelope({
      Type: 'UnsubscribeConfirmation',
      TopicArn: TOPIC,
      Message: 'You have unsubscribed.',
      Token: 'token-2',
      SubscribeURL: good,
    })
    expect((await post(unsubscribed)).body, 'an unsubscription changes nothing here').to.deep.equal({ outcome: 'ignored' })
    expect(confirmed).to.have.length(1)
  })
})
