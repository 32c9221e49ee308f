import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { envelopeContext, open } from '../../src/crypto/envelope.ts'
import { parseIdentifier } from '../../src/identity/identifiers.ts'
import { hashToken } from '../../src/identity/secrets.ts'
import { changeStaff } from '../../src/platform/staff.ts'
import { uniqueEmail } from './helpers.ts'
import type { useWebStack } from './web-stack.ts'

const password = 'correct horse battery'

/** Staff-side helpers over a web stack whose worker is off: messages stay where the test puts them. */
export function staffKit(f: ReturnType<typeof useWebStack>) {
  const owner = () => f.db.owner
  /** An account made through the API; its sign-up code is read from the sealed message (no worker runs). */
  async function account(email = uniqueEmail('person')) {
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const message = await owner()('outbox.security_outbox_messages').where({ destination: email }).orderBy('id', 'desc').first()
    const code = await sealedCode(message.id)
    expect((await f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code, password })).status).to.equal(201)
    const session = await f.stack.call('POST', '/sessions', { identifier: email, password })
    const token = String(session.body!.token)
    const identityId = (await owner()('identity.login_identifiers').where({ value: email }).first()).identity_id as string
    return { email, token, identityId, auth: f.stack.bearer(token) }
  }
  async function sealedCode(messageId: string): Promise<string> {
    const message = await owner()('outbox.security_outbox_messages').where({ id: messageId }).first()
    const { envelope } = await owner()('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).first()
    return open(f.keys.outboxKey, envelope, envelopeContext(messageId, message.purpose, message.channel, message.destination)).toString(
      'utf8',
    )
  }
  async function staffMember() {
    const person = await account(uniqueEmail('staff'))
    expect(await changeStaff(owner(), 'grant', parseIdentifier(person.email)!, 'test', new Date())).to.equal('granted')
    return person
  }
  /** An elevation for the session, as step-up would have written it. */
  async function elevate(person: { token: string; identityId: string }) {
    const session = await owner()('identity.sessions')
      .where({ token_hash: hashToken(person.token) })
      .first()
    const elevationToken = randomBytes(32).toString('base64url')
    await owner()('identity.elevations').insert({
      id: uuidv7(),
      identity_id: person.identityId,
      session_id: session.id,
      token_hash: hashToken(elevationToken),
      expires_at: new Date(Date.now() + 300_000),
    })
    return elevationToken
  }
  /** Dead-letters a message as the worker would have (reason given), its ciphertext erased. */
  async function deadLetter(messageId: string, reason = 'retries_exhausted', at = new Date()) {
    await owner().transaction(async (trx) => {
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).delete()
      await trx('outbox.security_outbox_messages').where({ id: messageId }).update({ state: 'dead_lettered', dead_lettered_at: at })
      await trx('outbox.security_outbox_dead_letters').insert({
        message_id: messageId,
        reason,
        last_failure_class: reason === 'retries_exhausted' ? 'UNAVAILABLE' : null,
        dead_lettered_at: at,
      })
    })
  }
  /** A sign-up whose code message died unsent: the old code (read before it died) and its ids. */
  async function deadSignUp(reason = 'retries_exhausted') {
    const email = uniqueEmail('locked-out')
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const message = await owner()('outbox.security_outbox_messages').where({ destination: email }).orderBy('id', 'desc').first()
    const oldCode = await sealedCode(message.id)
    await deadLetter(message.id, reason)
    return { email, messageId: message.id as string, challengeId: message.challenge_id as string, oldCode }
  }
  return { account, staffMember, elevate, deadLetter, deadSignUp, sealedCode }
}
