import { expect } from 'chai'
import { createKnex } from '../src/db/knex.ts'
import { courierKit } from './support/courier-kit.ts'
import { createVerifiedIdentity, createElevatedSession, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString()

describe('staff API keys: POST / GET /platform-admin/api-keys, rotation, DELETE', () => {
  const f = useWebStack({ worker: false })
  const kit = courierKit(f)
  const message = () => ({
    purpose: 'verification_code',
    channel: 'email',
    destination: uniqueEmail('keyed'),
    secret: { code: '482913' },
    expiresAt: inMinutes(10),
  })
  const audit = async (subject: string) =>
    (await f.db.owner('platform.audit_records').where({ subject }).orderBy('at')).map((row) => ({ actor: row.actor, action: row.action }))

  it('creating a key needs a fresh elevation: a staff session alone is refused 403, nothing written', async () => {
    const member = await kit.staff()
    const before = await f.db.owner('platform.api_keys').count({ n: '*' })
    const refused = await f.stack.call(
      'POST',
      '/platform-admin/api-keys',
      { name: 'no step-up', purposes: ['verification_code'], channels: ['email'] },
      { authorization: member.headers.authorization! },
    )
    expect(refused.status).to.equal(403)
    expect(refused.body!.code).to.equal('elevation_required')
    expect(await f.db.owner('platform.api_keys').count({ n: '*' })).to.deep.equal(before)
  })

  it('a stepped-up member who is not staff cannot create, list or revoke keys', async () => {
    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('not-staff'))
    const headers = await createElevatedSession(f.db.owner, identityId)
    const created = await f.stack.call(
      'POST',
      '/platform-admin/api-keys',
      { name: 'x', purposes: ['verification_code'], channels: ['email'] },
      headers,
    )
    expect(created.status).to.equal(403)
    expect(created.body!.code).to.equal('not_staff')
    expect((await f.stack.call('GET', '/platform-admin/api-keys', undefined, headers)).status).to.equal(403)
    const key = await kit.apiKey()
    expect((await f.stack.call('DELETE', `/platform-admin/api-keys/${key.id}`, undefined, headers)).status).to.equal(403)
    expect((await kit.send(key.key, message())).status, 'the key still works').to.equal(202)
  })

  it('shows the key once: the list carries scopes, limits and use, never key material; the table holds only a hash', async () => {
    const member = await kit.staff()
    const { id, key } = await kit.apiKey(
      { name: 'Acme auth', purposes: ['verification_code'], channels: ['email'], requestsPerMinute: 30 },
      member,
    )
    expect(key).to.match(/^sp_live_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/)
    expect((await kit.send(key, message())).status).to.equal(202)
    const list = await f.stack.call('GET', '/platform-admin/api-keys', undefined, member.headers)
    expect(list.status).to.equal(200)
    const item = (list.body!.items as Record<string, unknown>[]).find((entry) => entry.id === id)!
    expect(item).to.include({
      name: 'Acme auth',
      requestsPerMinute: 30,
      perDestinationPerHour: 5,
      createdBy: member.identityId,
      revokedAt: null,
    })
    expect(item.purposes).to.deep.equal(['verification_code'])
    expect(item.lastUsedAt).to.be.a('string')
    // The whole secret: base64url has '_' too, so the last piece after a split may be one letter.
    const secret = /^sp_live_[0-9a-f]{32}_(.+)$/.exec(key)![1]!
    expect(JSON.stringify(list.body)).not.to.include(secret)
    const row = await f.db.owner('platform.api_keys').where({ id }).first()
    expect(JSON.stringify(row)).not.to.include(secret)
    expect(row.secret_hash).to.have.length(32)
    expect(await audit(id)).to.deep.equal([{ actor: member.identityId, action: 'api_key.created' }])
  })

  it('rotates a key: the new one has the same scopes and limits, the old one stops at once; audited', async () => {
    const member = await kit.staff()
    const old = await kit.apiKey(
      { name: 'rotating', purposes: ['verification_code'], channels: ['email'], perDestinationPerHour: 3 },
      member,
    )
    const rotated = await f.stack.call('POST', `/platform-admin/api-keys/${old.id}/rotation`, undefined, member.headers)
    expect(rotated.status).to.equal(201)
    const fresh = { id: String(rotated.body!.id), key: String(rotated.body!.key) }
    expect((await kit.send(old.key, message())).status).to.equal(401)
    expect((await kit.send(fresh.key, message())).status).to.equal(202)
    const row = await f.db.owner('platform.api_keys').where({ id: fresh.id }).first()
    expect(row).to.include({ name: 'rotating', per_destination_per_hour: 3, replaces: old.id })
    expect(row.purposes).to.deep.equal(['verification_code'])
    expect(await audit(fresh.id)).to.deep.equal([{ actor: member.identityId, action: 'api_key.rotated' }])
    const again = await f.stack.call('POST', `/platform-admin/api-keys/${old.id}/rotation`, undefined, member.headers)
    expect(again.status, 'a revoked key is not rotated twice').to.equal(404)
  })

  it("changes a live key's hourly volume, new addresses an hour and link origins in place; a rotation keeps them; audited", async () => {
    const member = await kit.staff()
    const { id, key } = await kit.apiKey({ name: 'tuned', purposes: ['verification_code', 'magic_link'] }, member)
    const changes = `/platform-admin/api-keys/${id}/changes`
    const change = { sendsPerHour: 2, destinationsPerHour: 7, linkOrigins: ['https://bücher.example', 'https://login.example.org:8443/'] }
    expect((await f.stack.call('POST', changes, change, member.headers)).status).to.equal(204)
    const listed = (await f.stack.call('GET', '/platform-admin/api-keys', undefined, member.headers)).body!.items as Record<
      string,
      unknown
    >[]
    expect(listed.find((item) => item.id === id)).to.deep.include({
      sendsPerHour: 2,
      destinationsPerHour: 7,
      linkOrigins: ['https://xn--bcher-kva.example', 'https://login.example.org:8443'],
    })
    for (let i = 0; i < 2; i++) expect((await kit.send(key, message())).status).to.equal(202)
    const third = await kit.send(key, message())
    expect([third.status, third.body?.code], 'the new hourly volume holds at once').to.deep.equal([429, 'api_key_budget_exhausted'])

    const bare = await f.stack.call('POST', changes, { linkOrigins: [] }, member.headers)
    expect([bare.status, bare.body?.code], 'a magic_link key keeps an origin').to.deep.equal([422, 'link_origins_required'])
    const notOrigin = await f.stack.call('POST', changes, { linkOrigins: ['https://app.example.org/path'] }, member.headers)
    expect(notOrigin.status, 'an origin, not a URL').to.equal(422)
    const rotated = await f.stack.call('POST', `/platform-admin/api-keys/${id}/rotation`, undefined, member.headers)
    const row = await f.db
      .owner('platform.api_keys')
      .where({ id: String(rotated.body!.id) })
      .first()
    expect(row).to.deep.include({
      sends_per_hour: 2,
      destinations_per_hour: 7,
      link_origins: ['https://xn--bcher-kva.example', 'https://login.example.org:8443'],
    })
    expect((await f.stack.call('POST', changes, { sendsPerHour: 5 }, member.headers)).status, 'a revoked key').to.equal(404)
    expect((await audit(id)).map((entry) => entry.action)).to.deep.equal(['api_key.created', 'api_key.changed'])
  })

  it('revokes a key: it answers 401 from then on, a second revoke is 404; audited', async () => {
    const member = await kit.staff()
    const { id, key } = await kit.apiKey({}, member)
    expect((await f.stack.call('DELETE', `/platform-admin/api-keys/${id}`, undefined, member.headers)).status).to.equal(204)
    expect((await kit.send(key, message())).status).to.equal(401)
    const twice = await f.stack.call('DELETE', `/platform-admin/api-keys/${id}`, undefined, member.headers)
    expect(twice.status).to.equal(404)
    expect(twice.body!.code).to.equal('api_key_not_found')
    expect(await audit(id)).to.deep.equal([
      { actor: member.identityId, action: 'api_key.created' },
      { actor: member.identityId, action: 'api_key.revoked' },
    ])
  })

  it('refuses a key request with a scope it cannot have: 422, nothing written', async () => {
    const member = await kit.staff()
    const before = await f.db.owner('platform.api_keys').count({ n: '*' })
    for (const body of [
      { name: 'x', purposes: ['invitation'], channels: ['email'] },
      { name: 'x', purposes: ['verification_code'], channels: ['fax'] },
      { name: 'x', purposes: [], channels: ['email'] },
      { name: '', purposes: ['verification_code'], channels: ['email'] },
      { name: 'x', purposes: ['verification_code'], channels: ['email'], requestsPerMinute: 0 },
    ]) {
      const refused = await f.stack.call('POST', '/platform-admin/api-keys', body, member.headers)
      expect(refused.status, JSON.stringify(body)).to.equal(422)
    }
    expect(await f.db.owner('platform.api_keys').count({ n: '*' })).to.deep.equal(before)
  })

  it('the web role reads no key hash beyond the columns it authenticates with, and cannot write a key itself', async () => {
    const api = createKnex(f.db.apiUrl, { applicationName: 'sealpost-test-api', max: 1 })
    try {
      await expectRefusals(api)
    } finally {
      await api.destroy()
    }
  })

  async function expectRefusals(api: ReturnType<typeof createKnex>) {
    const error = await api('platform.api_keys')
      .insert({
        id: crypto.randomUUID(),
        name: 'forged',
        secret_hash: Buffer.alloc(32),
        purposes: ['verification_code'],
        channels: ['email'],
        requests_per_minute: 1,
        per_destination_per_hour: 1,
        per_destination_per_day: 1,
        created_by: crypto.randomUUID(),
        created_at: new Date(),
      })
      .then(
        () => undefined,
        (caught: { code?: string }) => caught,
      )
    expect(error?.code).to.equal('42501')
    const read = await api('platform.api_keys')
      .select('created_by')
      .then(
        () => undefined,
        (caught: { code?: string }) => caught,
      )
    expect(read?.code).to.equal('42501')
  }
})
