import { expect } from 'chai'
import { deliverOne } from './support/run-once.ts'
import { envelopeContext, open } from '../src/crypto/envelope.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { outboxHarness, outboxRows } from './support/outbox-harness.ts'
import { scriptedProvider, stalledProvider } from './support/scripted-provider.ts'
import { startWebStack } from './support/web-stack.ts'

describe('resend and supersede', () => {
  let db: TestDatabase
  let stack: Awaited<ReturnType<typeof startWebStack>>
  let harness: Awaited<ReturnType<typeof outboxHarness>>
  const keys = testKeys()
  const logs = capturingLogger()
  let now = new Date()
  const clock = () => now
  const rows = outboxRows(() => db)

  beforeEach(async () => {
    now = new Date()
    db = await createTestDatabase()
    stack = await startWebStack(db, { keys, logger: logs.logger, clock, worker: false })
    harness = await outboxHarness(db, { keys, clock, logger: logs.logger })
  })
  afterEach(async () => {
    await harness.close()
    await stack.stop()
    await db.drop()
  })

  const messagesOf = (email: string) => db.owner('outbox.security_outbox_messages').where({ destination: email }).orderBy('created_at')
  /** The code inside a message still holding its ciphertext (what the worker would send). */
  async function codeOf(messageId: string): Promise<string> {
    const message = await rows.message(messageId)
    const { envelope } = await db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).first()
    return open(keys.outboxKey, envelope, envelopeContext(messageId, message.purpose, message.channel, message.destination)).toString()
  }
  const recover = (email: string) => stack.call('POST', '/password-recoveries', { identifier: email })
  const complete = (email: string, code: string) =>
    stack.call('POST', '/password-recoveries/completion', { identifier: email, code, newPassword: 'the new password' })

  it('lets exactly one of 20 concurrent resends through: one live message, the rest superseded, only the newest code verifies', async () => {
    const email = uniqueEmail('race')
    await createVerifiedIdentity(db.owner, email)
    await recover(email)
    const [first] = await messagesOf(email)
    const oldCode = await codeOf(first.id)

    now = new Date(now.getTime() + 31_000)
    const answers = await Promise.all(Array.from({ length: 20 }, () => recover(email)))
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(20).fill(202))

    const messages = await messagesOf(email)
    const live = messages.filter((message) => message.state !== 'dead_lettered')
    expect(live).to.have.length(1)
    const reasons = await db
      .owner('outbox.security_outbox_dead_letters')
      .whereIn(
        'message_id',
        messages.filter((m) => m.state === 'dead_lettered').map((m) => m.id),
      )
      .pluck('reason')
    expect(reasons)
      .to.have.length(messages.length - 1)
      .and.to.satisfy((all: string[]) => all.every((reason) => reason === 'superseded_by_resend'))
    expect(await rows.ciphertexts(first.id), 'the superseded secret is erased').to.equal(0)

    const newCode = await codeOf(live[0].id)
    if (newCode !== oldCode) expect((await complete(email, oldCode)).status, 'the old code').to.equal(422)
    expect((await complete(email, newCode)).status, 'the newest code').to.equal(204)
  })

  it('refuses the recording of a worker whose message was superseded mid-send, and sends the newer one', async () => {
    const email = uniqueEmail('midsend')
    await createVerifiedIdentity(db.owner, email)
    await recover(email)
    const [older] = await messagesOf(email)
    const olderJob = await harness.nextJob()

    const stalled = stalledProvider('older-send')
    const midSend = deliverOne(harness.deps({ email: stalled.provider }), olderJob)
    await stalled.sending
    expect((await rows.message(older.id)).state).to.equal('leased')

    now = new Date(now.getTime() + 31_000)
    expect((await recover(email)).status).to.equal(202)
    stalled.release()
    await midSend

    expect(await rows.message(older.id)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(await rows.deadLetter(older.id)).to.include({ reason: 'superseded_by_resend' })
    expect(logs.text()).to.include('lease lost')
    const [, newer] = await messagesOf(email)
    const provider = scriptedProvider(() => ({ providerMessageId: 'newer-send' }))
    await deliverOne(harness.deps({ email: provider }), await harness.nextJob())
    expect(await rows.message(newer.id)).to.include({ state: 'published', attempt_count: 1 })
    expect(
      await db.owner('outbox.security_outbox_attempts').whereIn('message_id', [older.id, newer.id]).pluck('provider_message_id'),
    ).to.deep.equal(['newer-send'])
  })

  it('dead-letters the unsent message of a consumed challenge, and nothing is sent for it afterwards', async () => {
    const email = uniqueEmail('consume')
    await createVerifiedIdentity(db.owner, email)
    await recover(email)
    const [message] = await messagesOf(email)
    expect((await complete(email, await codeOf(message.id))).status).to.equal(204)

    expect(await rows.message(message.id)).to.include({ state: 'dead_lettered' })
    expect(await rows.deadLetter(message.id)).to.include({ reason: 'challenge_consumed' })
    const provider = scriptedProvider(() => ({ providerMessageId: 'never' }))
    await deliverOne(harness.deps({ email: provider }), await harness.nextJob())
    expect(provider.calls).to.have.length(0)
  })

  it('spends an attempt per wrong code and kills the challenge at zero', async () => {
    const email = uniqueEmail('guess')
    await createVerifiedIdentity(db.owner, email)
    await recover(email)
    const [message] = await messagesOf(email)
    const code = await codeOf(message.id)
    const wrong = code === '000000' ? '111111' : '000000'
    for (let guess = 1; guess <= 5; guess++) expect((await complete(email, wrong)).status).to.equal(422)
    expect((await db.owner('identity.challenges').first()).attempts_left).to.equal(0)
    expect((await complete(email, code)).status, 'even the right code, once the challenge is dead').to.equal(422)
  })
})
