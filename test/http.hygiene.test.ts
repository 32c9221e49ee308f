import { expect } from 'chai'
import { hashPassword } from '../src/identity/secrets.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe('X-Request-ID', () => {
  const f = useWebStack({ worker: false })
  const lines = () =>
    f.logs
      .text()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>)

  it('echoes a caller’s id and writes it on every log line of that request, the enqueued message id among them', async () => {
    const email = uniqueEmail('traced')
    await createVerifiedIdentity(f.db.owner, email)
    const id = `req-${Date.now()}-traced`
    const response = await f.stack.call('POST', '/password-recoveries', { identifier: email }, { 'x-request-id': id })
    expect(response.status).to.equal(202)
    expect(response.headers.get('x-request-id')).to.equal(id)

    const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first()
    const ofRequest = lines().filter((line) => line.requestId === id)
    expect(ofRequest.map((line) => line.message)).to.include.members(['message enqueued', 'request'])
    expect(ofRequest.find((line) => line.message === 'message enqueued')).to.include({
      messageId: message.id,
      purpose: 'password_recovery',
      channel: 'email',
    })
    // nothing of that request was logged without it
    expect(lines().filter((line) => line.messageId === message.id && line.requestId !== id)).to.deep.equal([])
  })

  it('makes one when the caller sends none, and replaces one that is too long or carries other characters', async () => {
    const none = await f.stack.call('GET', '/healthz')
    expect(none.headers.get('x-request-id')).to.match(UUID)
    for (const bad of ['a'.repeat(201), 'spaces are out', '<script>', 'x"y']) {
      const response = await f.stack.call('GET', '/healthz', undefined, { 'x-request-id': bad })
      expect(response.headers.get('x-request-id'), bad).to.match(UUID)
    }
    expect(f.logs.text()).not.to.include('<script>').and.not.include('a'.repeat(201))
    const heroku = 'b3f1c8a2-5d4e-4f6a-9b7c-0e1d2f3a4b5c'
    expect((await f.stack.call('GET', '/healthz', undefined, { 'x-request-id': heroku })).headers.get('x-request-id')).to.equal(heroku)
  })
})

describe('HTTP hygiene', () => {
  const f = useWebStack({ worker: false })

  it('sends security headers on every answer', async () => {
    for (const response of [
      await f.stack.call('GET', '/healthz'),
      await f.stack.call('POST', '/sessions', { identifier: uniqueEmail(), password: 'x' }),
      await f.stack.call('GET', '/nowhere'),
    ]) {
      expect(response.headers.get('x-content-type-options')).to.equal('nosniff')
      expect(response.headers.get('strict-transport-security')).to.match(/max-age=\d+/)
      expect(response.headers.get('content-security-policy')).to.include("default-src 'self'").and.include("frame-ancestors 'self'")
      expect(response.headers.get('x-frame-options')).to.equal('SAMEORIGIN')
      expect(response.headers.get('referrer-policy')).to.equal('no-referrer')
      expect(response.headers.get('x-powered-by')).to.equal(null)
    }
  })

  it('marks every answer Cache-Control: no-store, above all those that carry a session or elevation token', async () => {
    const email = uniqueEmail('cached')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await f.db
      .owner('identity.password_credentials')
      .insert({ identity_id: identityId, password_hash: await hashPassword('a long enough passphrase') })
    const session = await f.stack.call('POST', '/sessions', { identifier: email, password: 'a long enough passphrase' })
    expect(session.status).to.equal(201)
    expect(session.body).to.have.property('token')
    expect(session.headers.get('cache-control')).to.equal('no-store')
    for (const response of [
      await f.stack.call('GET', '/healthz'),
      await f.stack.call('POST', '/sessions', { identifier: email, password: 'wrong' }),
      await f.stack.call('DELETE', '/sessions/current', undefined, f.stack.bearer(session.body!.token)),
    ]) {
      expect(response.headers.get('cache-control')).to.equal('no-store')
    }
  })
})
