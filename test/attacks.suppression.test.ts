import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import { createSessionTx } from '../src/identity/sessions.ts'
import { devSnsSigner, sesEventMessage, type SnsSigner } from '../src/providers/ses/dev-sns-signer.ts'
import { createVerifiedIdentity, eventually, inbox } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:sealpost-ses-events'
const certDir = mkdtempSync(path.join(tmpdir(), 'sealpost-sns-'))

/** A mailbox of its own per test, at a server that refuses sub-addresses. */
const mailbox = () => `alice.${randomBytes(4).toString('hex')}@corp.example`
const tagged = (address: string, tag: string) => address.replace('@', `+${tag}@`)

describe('attacks on the suppression list: a stranger’s bounce or complaint never silences the owner', () => {
  let signer: SnsSigner
  before(async () => {
    signer = await devSnsSigner(certDir)
  })
  // The web's clock runs ahead when a test moves it past the 30 s between two codes of one challenge; the worker keeps real time.
  let ahead = 0
  const later = (seconds: number) => {
    ahead += seconds * 1000
  }
  const f = useWebStack({
    clock: () => new Date(Date.now() + ahead),
    webhooks: { SES_EVENTS_TOPIC_ARN: TOPIC, SNS_TEST_SIGNING_CERT: path.join(certDir, 'sns-test-signing-cert.pem') },
  })

  /** SES tells us, through the SNS-signed webhook, that the message `providerMessageId` bounced or was complained about by `recipient`. */
  async function sesReports(kind: 'bounce' | 'complaint', providerMessageId: string, recipient: string, at = new Date()) {
    const envelope = signer.envelope({
      Type: 'Notification',
      TopicArn: TOPIC,
      Message: sesEventMessage(kind, providerMessageId, at, recipient),
    })
    const answer = await f.stack.call('POST', '/webhooks/ses', JSON.stringify(envelope), {
      'content-type': 'text/plain; charset=UTF-8',
      'x-amz-sns-message-type': 'Notification',
    })
    expect(answer.body, `the ${kind} is stored`).to.deep.equal({ outcome: 'stored' })
  }

  /** The newest message to `destination` for `purpose` once the worker settled it: its state, dead-letter reason and SES id. */
  async function settled(destination: string, purpose: string) {
    return await eventually(async () => {
      const row = await f.db
        .owner('outbox.security_outbox_messages as m')
        .leftJoin('outbox.security_outbox_dead_letters as d', 'd.message_id', 'm.id')
        .leftJoin('outbox.security_outbox_attempts as a', 'a.message_id', 'm.id')
        .where({ 'm.destination': destination, 'm.purpose': purpose })
        .orderBy('m.id', 'desc')
        .first<{ id: string; state: string; reason: string | null; provider_message_id: string | null } | undefined>(
          'm.id',
          'm.state',
          'd.reason',
          'a.provider_message_id',
        )
      return row && (row.state === 'published' || row.state === 'dead_lettered') ? row : undefined
    }, `the ${purpose} message to ${destination} settled`)
  }
  const sent = async (destination: string, purpose: string) => {
    const message = await settled(destination, purpose)
    expect({ state: message.state, reason: message.reason }, `the ${purpose} message`).to.deep.equal({ state: 'published', reason: null })
    return message.provider_message_id!
  }
  const suppressions = async () => Number((await f.db.owner('outbox.suppressed_destinations').count({ n: '*' }))[0]!.n)

  /** The owner: an account on `email`, signed in (for step-ups). */
  async function owner(email: string) {
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, new Date(Date.now() + ahead)))
    return f.stack.bearer(token)
  }
  const signUp = async (email: string) =>
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })).status).to.equal(202)
  const recover = async (email: string) =>
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: email })).status).to.equal(202)

  it('a stranger’s bounce silences the owner: a permanent bounce for alice+x suppresses alice+x alone, and alice’s recovery is sent', async () => {
    const alice = mailbox()
    await owner(alice)
    const variant = tagged(alice, 'x')

    // The stranger signs up alice+x; its server refuses sub-addresses and SES reports a permanent bounce.
    await signUp(variant)
    await sesReports('bounce', await sent(variant, 'sign_up'), variant.toUpperCase())

    // The owner asks for a recovery: it is sent, and reaches her.
    await recover(alice)
    await sent(alice, 'password_recovery')
    expect(await inbox(f.stack.emulator.url, alice)).to.have.length(1)

    // What the bounce proved still holds: the next code to alice+x is dead-lettered without a send.
    later(31)
    await signUp(variant)
    expect(await settled(variant, 'sign_up')).to.include({ state: 'dead_lettered', reason: 'destination_suppressed' })
    expect(await inbox(f.stack.emulator.url, variant)).to.have.length(1)
  })

  it('a bounce whose recipient is another address than the message’s destination suppresses nothing (the event is stored)', async () => {
    const alice = mailbox()
    await signUp(alice)
    const providerMessageId = await sent(alice, 'sign_up')
    const before = await suppressions()

    const others = [tagged(alice, 'y'), 'someone@example.com', alice.replace('@corp.example', '@corp2.example')]
    for (const [index, other] of others.entries()) await sesReports('bounce', providerMessageId, other, new Date(Date.now() - index * 1000))

    expect(await suppressions()).to.equal(before)
    const events = await f.db
      .owner('outbox.security_outbox_delivery_events as e')
      .join('outbox.security_outbox_messages as m', 'm.id', 'e.message_id')
      .where({ 'm.destination': alice, 'e.event': 'bounced' })
    expect(events, 'each event stored').to.have.length(3)
    later(31)
    await signUp(alice)
    await eventually(async () => ((await inbox(f.stack.emulator.url, alice)).length === 2 ? true : undefined), 'the second code sent')
  })

  it('a stranger’s complaint silences the owner: her address complains about sign-up spam, then her recovery and step-up codes are sent', async () => {
    const alice = mailbox()
    const auth = await owner(alice)

    // The stranger's sign-up for her address sends her a notice with a recovery code; she reports it as spam.
    await signUp(alice)
    await sesReports('complaint', await sent(alice, 'password_recovery'), alice)
    expect(await f.db.owner('outbox.suppressed_destinations').where({ reason: 'complaint' })).to.have.length.at.least(1)

    // She then asks for a recovery, and (signed in) for a step-up: both are sent.
    later(31)
    await recover(alice)
    await sent(alice, 'password_recovery')
    expect((await f.stack.call('POST', '/step-ups', {}, auth)).status).to.equal(202)
    await sent(alice, 'step_up')
    expect(await inbox(f.stack.emulator.url, alice)).to.have.length(3)
  })

  it('a complaint still stops what nobody at that address asked for: the next sign-up code to it is dead-lettered unsent', async () => {
    const bob = mailbox()
    await signUp(bob)
    await sesReports('complaint', await sent(bob, 'sign_up'), bob)

    later(31)
    await signUp(bob)
    expect(await settled(bob, 'sign_up')).to.include({ state: 'dead_lettered', reason: 'destination_suppressed' })
    expect(await inbox(f.stack.emulator.url, bob)).to.have.length(1)
  })
})
