import { expect } from 'chai'
import { sesEventFrom } from '../src/providers/ses/events.ts'
import { wasenderEventsFrom } from '../src/providers/wasender/events.ts'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fetchedCertificates, isSnsUrl, snsStringToSign, topicRegion, type SnsEnvelope } from '../src/providers/ses/sns-verifier.ts'
import { devSnsSigner, sesEventMessage } from '../src/providers/ses/dev-sns-signer.ts'

const AT = new Date('2026-12-01T08:00:00Z')

describe('provider events, mapped to ours', () => {
  const ses: [string, ReturnType<typeof sesEventFrom> extends infer T ? Partial<NonNullable<T>> | null : never][] = [
    ['bounce', { event: 'bounced', subtype: 'Permanent/General', suppress: 'permanent_bounce' }],
    ['transient-bounce', { event: 'bounced', subtype: 'Transient/MailboxFull', suppress: null }],
    ['complaint', { event: 'complained', subtype: 'abuse', suppress: 'complaint' }],
    ['delivery', { event: 'delivered', subtype: null, suppress: null }],
    ['reject', { event: 'rejected', subtype: 'Bad content', suppress: null }],
    ['delay', { event: 'delayed', subtype: 'MailboxFull', suppress: null }],
  ]
  for (const [kind, expected] of ses) {
    it(`maps an SES ${kind} event`, () => {
      expect(sesEventFrom(JSON.parse(sesEventMessage(kind as 'bounce', 'ses-1', AT)), new Date(0))).to.deep.include({
        providerMessageId: 'ses-1',
        occurredAt: AT,
        ...expected,
      })
    })
  }

  it('names the recipients a bounce or complaint is about, as SES wrote them (inside <…> when given a display form)', () => {
    const recipientsOf = (kind: 'bounce' | 'complaint', recipient: string) =>
      sesEventFrom(JSON.parse(sesEventMessage(kind, 'ses-1', AT, recipient)), AT)?.recipients
    expect(recipientsOf('bounce', 'Alice+X@Corp.example')).to.deep.equal(['Alice+X@Corp.example'])
    expect(recipientsOf('complaint', '"Alice" <alice@corp.example>')).to.deep.equal(['alice@corp.example'])
    expect(sesEventFrom(JSON.parse(sesEventMessage('delivery', 'ses-1', AT, 'alice@corp.example')), AT)?.recipients).to.deep.equal([])
    expect(
      sesEventFrom({ eventType: 'Bounce', mail: { messageId: 'm' }, bounce: { bounceType: 'Permanent' } }, AT)?.recipients,
    ).to.deep.equal([])
  })

  it('reads the older notificationType form and ignores the kinds it does not record', () => {
    expect(sesEventFrom({ notificationType: 'Complaint', mail: { messageId: 'm' }, complaint: {} }, AT)).to.include({
      event: 'complained',
      suppress: 'complaint',
    })
    for (const kind of ['Send', 'Open', 'Click', 'Rendering Failure', 'Subscription'])
      expect(sesEventFrom({ eventType: kind, mail: { messageId: 'm' } }, AT)).to.equal(null)
    expect(sesEventFrom({ eventType: 'Bounce' }, AT), 'no message id').to.equal(null)
    expect(sesEventFrom('garbage', AT)).to.equal(null)
  })

  it('maps Wasender statuses: 0 rejected, 3–5 delivered, 1 and 2 nothing; seconds or milliseconds', () => {
    const update = (status: number, timestamp: number) => ({
      event: 'messages.update',
      data: { key: { id: 42 }, update: { status } },
      timestamp,
    })
    expect(wasenderEventsFrom(update(3, AT.getTime()), new Date(0))).to.deep.equal([
      { providerMessageId: '42', event: 'delivered', subtype: null, occurredAt: AT, suppress: null, recipients: [] },
    ])
    expect(wasenderEventsFrom(update(4, AT.getTime() / 1000), new Date(0))[0]).to.include({ event: 'delivered', subtype: 'read' })
    expect(wasenderEventsFrom(update(0, AT.getTime()), AT)[0]).to.include({ event: 'rejected', subtype: 'error' })
    expect(wasenderEventsFrom(update(1, AT.getTime()), AT)).to.deep.equal([])
    expect(wasenderEventsFrom(update(2, AT.getTime()), AT)).to.deep.equal([])
    expect(wasenderEventsFrom({ event: 'messages.upsert', data: {} }, AT)).to.deep.equal([])
    expect(
      wasenderEventsFrom(
        {
          event: 'messages.update',
          data: [
            { key: { id: 'a' }, update: { status: 3 } },
            { key: { id: 'b' }, update: { status: 5 } },
          ],
        },
        AT,
      ),
    ).to.have.length(2)
  })
})

describe('SNS signature inputs', () => {
  const base = {
    MessageId: 'id',
    TopicArn: 'arn:aws:sns:eu-west-1:123456789012:t',
    Message: 'm\nline',
    Timestamp: 't',
    SignatureVersion: '2',
    Signature: 's',
    SigningCertURL: 'u',
  }

  it('signs a notification’s fields in order, Subject only when present', () => {
    expect(snsStringToSign({ ...base, Type: 'Notification' })).to.equal(
      'Message\nm\nline\nMessageId\nid\nTimestamp\nt\nTopicArn\narn:aws:sns:eu-west-1:123456789012:t\nType\nNotification\n',
    )
    expect(snsStringToSign({ ...base, Type: 'Notification', Subject: 'S' })).to.include('MessageId\nid\nSubject\nS\nTimestamp\n')
  })

  it('signs a confirmation with its SubscribeURL and Token', () => {
    const envelope: SnsEnvelope = { ...base, Type: 'SubscriptionConfirmation', SubscribeURL: 'https://x', Token: 'tok' }
    expect(snsStringToSign(envelope)).to.equal(
      'Message\nm\nline\nMessageId\nid\nSubscribeURL\nhttps://x\nTimestamp\nt\nToken\ntok\nTopicArn\narn:aws:sns:eu-west-1:123456789012:t\nType\nSubscriptionConfirmation\n',
    )
  })

  it('accepts only https://sns.<region>.amazonaws.com for the topic’s region', () => {
    const pem = /^\/[A-Za-z0-9_-]+\.pem$/
    expect(topicRegion(base.TopicArn)).to.equal('eu-west-1')
    expect(isSnsUrl('https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-abc.pem', 'eu-west-1', pem)).to.equal(true)
    for (const url of [
      'http://sns.eu-west-1.amazonaws.com/a.pem',
      'https://sns.eu-west-1.amazonaws.com.evil.test/a.pem',
      'https://evil.test/sns.eu-west-1.amazonaws.com/a.pem',
      'https://sns.eu-west-1.amazonaws.com:8443/a.pem',
      'https://user@sns.eu-west-1.amazonaws.com/a.pem',
      'https://sns.us-east-1.amazonaws.com/a.pem',
      'https://sns.eu-west-1.amazonaws.com/a.txt',
      'not a url',
    ])
      expect(isSnsUrl(url, 'eu-west-1', pem), url).to.equal(false)
  })

  it('fetches each certificate URL once, keeps a failure a while, and caps new URLs a minute', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-cert-'))
    try {
      const pem = await readFile((await devSnsSigner(dir)).certificatePath, 'utf8')
      const fetched: string[] = []
      let now = Date.now()
      const certificates = fetchedCertificates({
        newUrlsPerMinute: 3,
        clock: () => new Date(now),
        fetch: async (url) => {
          fetched.push(url)
          if (url.includes('missing')) throw new Error('404')
          return pem
        },
      })
      await certificates('https://sns.eu-west-1.amazonaws.com/a.pem')
      await certificates('https://sns.eu-west-1.amazonaws.com/a.pem')
      await certificates('https://sns.eu-west-1.amazonaws.com/missing.pem').catch(() => undefined)
      await certificates('https://sns.eu-west-1.amazonaws.com/missing.pem').catch(() => undefined)
      expect(fetched).to.deep.equal(['https://sns.eu-west-1.amazonaws.com/a.pem', 'https://sns.eu-west-1.amazonaws.com/missing.pem'])
      await certificates('https://sns.eu-west-1.amazonaws.com/b.pem')
      const refused = await certificates('https://sns.eu-west-1.amazonaws.com/c.pem').then(
        () => 'fetched',
        () => 'refused',
      )
      expect(refused, 'the fourth new URL within a minute').to.equal('refused')
      now += 60_000
      await certificates('https://sns.eu-west-1.amazonaws.com/c.pem')
      expect(fetched).to.have.length(4)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
