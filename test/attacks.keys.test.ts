import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

/**
 * Attacks with a courier API key (docs/courier.md): a key that leaks, or a caller that sends more
 * than its owner meant, is bounded by the key's own budgets, and the links it may send are the
 * key's configured origins only.
 */
describe('attacks with a courier API key', () => {
  let now = new Date()
  const f = useWebStack({ worker: false, clock: () => now, clientLimitPerMinute: 5 })
  beforeEach(() => {
    now = new Date(now.getTime() + 2 * 3_600_000)
  })

  /** A key made through the real staff route, by a stepped-up staff member, at the stack's time. */
  async function apiKey(request: Record<string, unknown>) {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const headers = await createElevatedSession(f.db.owner, identityId, now)
    const body = { name: 'leaky app', purposes: ['verification_code'], channels: ['email'], ...request }
    const created = await f.stack.call('POST', '/platform-admin/api-keys', body, headers)
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    return String(created.body!.key)
  }
  const send = (key: string, body: Record<string, unknown>) =>
    f.stack.call('POST', '/v1/messages', body, { authorization: `Bearer ${key}`, 'idempotency-key': randomBytes(12).toString('hex') })
  const code = (destination: string) => ({
    purpose: 'verification_code',
    channel: 'email',
    destination,
    secret: { code: '123456' },
    expiresAt: new Date(now.getTime() + 600_000).toISOString(),
  })
  const link = (destination: string, url: string) => ({ ...code(destination), purpose: 'magic_link', secret: { link: url } })
  const stranger = () => `s.${randomBytes(5).toString('hex')}@victims.example`

  it('a leaked key sends a code to a hundred new addresses an hour at most: the next new address is refused 429 until the hour is over', async () => {
    const key = await apiKey({})
    for (let i = 0; i < 100; i++) expect((await send(key, code(stranger()))).status, `address ${i + 1}`).to.equal(202)
    const refused = await send(key, code(stranger()))
    expect([refused.status, refused.body?.code]).to.deep.equal([429, 'api_key_budget_exhausted'])
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3_600)
  })

  it("a key's hourly volume bounds what it sends, whatever the destinations", async () => {
    const key = await apiKey({ sendsPerHour: 10, perDestinationPerHour: 100 })
    const one = stranger()
    for (let i = 0; i < 10; i++) expect((await send(key, code(one))).status).to.equal(202)
    const refused = await send(key, code(stranger()))
    expect([refused.status, refused.body?.code]).to.deep.equal([429, 'api_key_budget_exhausted'])
    now = new Date(now.getTime() + 3_600_000)
    expect((await send(key, code(one))).status, 'the next hour').to.equal(202)
  })

  it('a key without allowed link origins cannot send a magic link, wherever it points', async () => {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const headers = await createElevatedSession(f.db.owner, identityId, now)
    const body = { name: 'no origins', purposes: ['magic_link'], channels: ['email'] }
    const refused = await f.stack.call('POST', '/platform-admin/api-keys', body, headers)
    expect([refused.status, refused.body?.code], 'no such key is issued').to.deep.equal([422, 'link_origins_required'])
    // A key from before link origins existed has none, as the migration leaves it.
    const key = await apiKey({ purposes: ['magic_link'], linkOrigins: ['https://app.example.org'] })
    await f.db.owner('platform.api_keys').where({ name: 'leaky app' }).update({ link_origins: [] })
    const answer = await send(key, link(stranger(), 'https://evil.example/sign-in?token=abc'))
    expect([answer.status, answer.body?.code]).to.deep.equal([422, 'link_origin_not_allowed'])
  })

  it('a magic link to another origin, or to an IDN look-alike of the allowed one, is refused and nothing is written', async () => {
    const key = await apiKey({ purposes: ['magic_link'], linkOrigins: ['https://app.example.org'] })
    const to = stranger()
    for (const url of [
      'https://app.example.org.evil.example/sign-in?token=abc',
      'https://аpp.example.org/sign-in?token=abc',
      'https://app.exаmple.org/sign-in?token=abc',
      'https://app.example.org:8443/sign-in?token=abc',
      'https://evil.example/?next=https://app.example.org',
    ]) {
      const answer = await send(key, link(to, url))
      expect([answer.status, answer.body?.code], url).to.deep.equal([422, 'link_origin_not_allowed'])
    }
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: to })).to.have.length(0)
    expect((await send(key, link(to, 'https://app.example.org/sign-in?token=abc'))).status, 'the allowed origin').to.equal(202)
  })

  it('failed authentications on the courier routes are counted per client: past the limit they are answered 429, and a real key still sends', async () => {
    const key = await apiKey({})
    const statuses: number[] = []
    for (let i = 0; i < 7; i++)
      statuses.push((await send(`sp_live_${randomBytes(16).toString('hex')}_${'A'.repeat(43)}`, code(stranger()))).status)
    expect(statuses).to.deep.equal([401, 401, 401, 401, 401, 429, 429])
    expect((await send(key, code(stranger()))).status, 'the real key from the same network').to.equal(202)
  })
})
