import { createPrivateKey, sign, type KeyObject } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { snsStringToSign, type SnsEnvelope } from './sns-verifier.ts'

/** The topic `npm start` accepts SES events from when SES_EVENTS_TOPIC_ARN is unset (development only). */
export const DEV_TOPIC_ARN = 'arn:aws:sns:us-east-1:000000000000:sealpost-dev-ses-events'

/** Signs SNS envelopes the way SNS does, with a local key whose certificate SNS_TEST_SIGNING_CERT names. */
export type SnsSigner = {
  certificatePath: string
  /** A signed envelope; `overrides` are applied before signing (or after, with `tamper`). */
  envelope(
    fields: Partial<SnsEnvelope> & Pick<SnsEnvelope, 'Type' | 'Message' | 'TopicArn'>,
    options?: { version?: '1' | '2'; tamper?: Partial<SnsEnvelope> },
  ): SnsEnvelope
}

/**
 * Development and tests only: a self-signed RSA certificate and key in `dir` (made once, kept),
 * through the `selfsigned` dev dependency, imported here only.
 */
export async function devSnsSigner(dir: string): Promise<SnsSigner> {
  const certificatePath = path.join(dir, 'sns-test-signing-cert.pem')
  const keyPath = path.join(dir, 'sns-test-signing-key.pem')
  let key: KeyObject
  try {
    key = createPrivateKey(await readFile(keyPath, 'utf8'))
    await readFile(certificatePath, 'utf8')
  } catch {
    const { generate } = await import('selfsigned')
    const pems = await generate([{ name: 'commonName', value: 'sns.amazonaws.com' }], {
      keySize: 2048,
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 3_650 * 86_400_000),
    })
    await mkdir(dir, { recursive: true })
    await writeFile(keyPath, pems.private, { mode: 0o600 })
    await writeFile(certificatePath, pems.cert)
    key = createPrivateKey(pems.private)
  }
  return {
    certificatePath,
    envelope(fields, options = {}) {
      const region = /^arn:aws:sns:([a-z0-9-]+):/.exec(fields.TopicArn)?.[1] ?? 'us-east-1'
      const version = options.version ?? '2'
      const unsigned: SnsEnvelope = {
        MessageId: crypto.randomUUID(),
        Timestamp: new Date().toISOString(),
        SignatureVersion: version,
        SigningCertURL: `https://sns.${region}.amazonaws.com/SimpleNotificationService-0000000000000000000000000000000a.pem`,
        Signature: '',
        ...fields,
      }
      const signature = sign(version === '1' ? 'sha1' : 'sha256', Buffer.from(snsStringToSign(unsigned), 'utf8'), key).toString('base64')
      return { ...unsigned, Signature: signature, ...options.tamper }
    },
  }
}

/**
 * An SES event-publishing record for one sent message, as SES puts it in an SNS Notification;
 * `recipient` is the address it names (a bounce or complaint suppresses only when that is the
 * message's destination).
 */
export function sesEventMessage(
  kind: 'bounce' | 'transient-bounce' | 'complaint' | 'delivery' | 'reject' | 'delay',
  sesMessageId: string,
  at = new Date(),
  recipient = 'someone@example.com',
): string {
  const mail = {
    timestamp: at.toISOString(),
    messageId: sesMessageId,
    source: 'no-reply@sealpost.test',
    destination: [recipient],
  }
  const timestamp = at.toISOString()
  const records = {
    bounce: {
      eventType: 'Bounce',
      mail,
      bounce: {
        bounceType: 'Permanent',
        bounceSubType: 'General',
        timestamp,
        bouncedRecipients: [{ emailAddress: recipient }],
      },
    },
    'transient-bounce': {
      eventType: 'Bounce',
      mail,
      bounce: {
        bounceType: 'Transient',
        bounceSubType: 'MailboxFull',
        timestamp,
        bouncedRecipients: [{ emailAddress: recipient }],
      },
    },
    complaint: {
      eventType: 'Complaint',
      mail,
      complaint: { complaintFeedbackType: 'abuse', timestamp, complainedRecipients: [{ emailAddress: recipient }] },
    },
    delivery: { eventType: 'Delivery', mail, delivery: { timestamp, recipients: [recipient], smtpResponse: '250 OK' } },
    reject: { eventType: 'Reject', mail, reject: { reason: 'Bad content' } },
    delay: {
      eventType: 'DeliveryDelay',
      mail,
      deliveryDelay: { delayType: 'MailboxFull', timestamp, delayedRecipients: [{ emailAddress: recipient }] },
    },
  }
  return JSON.stringify(records[kind])
}
