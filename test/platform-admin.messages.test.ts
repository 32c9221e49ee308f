import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { hashToken } from '../src/identity/secrets.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { createKnex } from '../src/db/knex.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/security-outbox'
const password = 'correct horse battery'

describe("staff: one message's history", () => {
  const f = useWebStack()

  /** A signed-up, signed-in account; its code read from the SES emulator's inbox. */
  async function account(email = uniqueEmail('person')) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const [mail] = await eventually(
      async () => ((await inbox(f.stack.emulator.url, email)).length ? inbox(f.stack.emulator.url, email) : undefined),
      'sign-up code',
    )
    const code = /\b(\d{6})\b/.exec(mail!.body.text ?? '')![1]!
    expect((await f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code, password })).status).to.equal(201)
    const token = String((await f.stack.call('POST', '/sessions', { identifier: email, password })).body!.token)
    return { email, token, auth: f.stack.bearer(token) }
  }
  async function staffMember() {
    const person = await account(uniqueEmail('staff'))
    expect(await changeStaff(f.db.owner, 'grant', parseIdentifier(person.email)!, 'test', new Date())).to.equal('granted')
    return person
  }

  it('shows the message with its destination masked, every attempt with its class, and the dead letter', async () => {
    const staff = await staffMember()
    const destination = uniqueEmail('alice.smith')
    const dead = await insertFailedDeadLetter(f.db.owner, { destination, failures: ['UNAVAILABLE', 'THROTTLED', 'INDETERMINATE'] })

    const answer = await f.stack.call('GET', `${BASE}/messages/${dead.messageId}`, undefined, staff.auth)

    expect(answer.status).to.equal(200)
    const body = answer.body as {
      message: Record<string, unknown>
      attempts: Record<string, unknown>[]
      deadLetter: Record<string, unknown>
    }
    expect(body.message).to.include({
      messageId: dead.messageId,
      purpose: 'password_recovery',
      channel: 'email',
      state: 'dead_lettered',
      attemptCount: 3,
    })
    expect(body.message.maskedDestination).to.match(/^a•••\w@e•••\.com$/)
    expect(JSON.stringify(body)).not.to.include(destination.split('@')[0]!)
    expect(body.attempts.map((a) => [a.attemptNo, a.outcome, a.failureClass])).to.deep.equal([
      [1, 'retryable_error', 'UNAVAILABLE'],
      [2, 'retryable_error', 'THROTTLED'],
      [3, 'failed', 'INDETERMINATE'],
    ])
    expect(body.deadLetter).to.include({ reason: 'retries_exhausted', lastFailureClass: 'INDETERMINATE' })
  })

  it('shows a delivered message with its published attempt, no dead letter and what the provider reported', async () => {
    const staff = await staffMember()
    const person = await account()
    const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: person.email }).first()
    const occurredAt = new Date(Date.now() - 60_000)
    await f.db
      .owner('outbox.security_outbox_delivery_events')
      .insert({ message_id: message.id, event: 'delivered', subtype: null, occurred_at: occurredAt })
    const answer = await f.stack.call('GET', `${BASE}/messages/${message.id}`, undefined, staff.auth)
    expect(answer.body).to.nested.include({
      'message.state': 'published',
      'attempts[0].outcome': 'published',
      'attempts[0].failureClass': null,
      deadLetter: null,
    })
    expect(answer.body!.events).to.have.length(1)
    expect(answer.body).to.nested.include({ 'events[0].event': 'delivered', 'events[0].subtype': null })
  })

  it('answers 404 message_not_found for an unknown or malformed id, and the usual refusals to others', async () => {
    const staff = await staffMember()
    const stranger = await account()
    for (const id of [uuidv7(), 'not-a-uuid']) {
      const answer = await f.stack.call('GET', `${BASE}/messages/${id}`, undefined, staff.auth)
      expect(answer).to.deep.include({ status: 404 })
      expect(answer.body).to.include({ code: 'message_not_found' })
    }
    const dead = await insertFailedDeadLetter(f.db.owner, {
      destination: uniqueEmail('victim'),
      failures: ['REJECTED'],
      reason: 'provider_rejected',
    })
    expect((await f.stack.call('GET', `${BASE}/messages/${dead.messageId}`, undefined, stranger.auth)).body).to.include({
      code: 'not_staff',
    })
    expect((await f.stack.call('GET', `${BASE}/messages/${dead.messageId}`)).status).to.equal(401)
  })

  it('reads nothing for a web-role connection without a live staff session, whatever hash it passes (42501)', async () => {
    const staff = await staffMember()
    const stranger = await account()
    const dead = await insertFailedDeadLetter(f.db.owner, {
      destination: uniqueEmail('victim'),
      failures: ['REJECTED'],
      reason: 'provider_rejected',
    })
    // The attack: a compromised web process calls the function directly with hashes it can make up or read.
    const web = createKnex(f.db.apiUrl, { applicationName: 'attacker', max: 1 })
    try {
      const call = (hash: Buffer) => web.raw('SELECT outbox.message_history(?, ?) AS h', [hash, dead.messageId])
      for (const hash of [Buffer.alloc(32), hashToken(stranger.token)]) {
        const refused = await call(hash).then(
          () => undefined,
          (error: { code?: string }) => error.code,
        )
        expect(refused).to.equal('42501')
      }
      expect((await call(hashToken(staff.token))).rows[0].h.message.messageId).to.equal(dead.messageId)
      // A signed-out staff session stops working at once.
      expect((await f.stack.call('DELETE', '/sessions/current', undefined, staff.auth)).status).to.equal(204)
      expect(
        await call(hashToken(staff.token)).then(
          () => undefined,
          (error: { code?: string }) => error.code,
        ),
      ).to.equal('42501')
      // And the web role still cannot read the tables behind it.
      expect(
        await web('outbox.security_outbox_messages')
          .first()
          .then(
            () => undefined,
            (error: { code?: string }) => error.code,
          ),
      ).to.equal('42501')
    } finally {
      await web.destroy()
    }
  })
})
