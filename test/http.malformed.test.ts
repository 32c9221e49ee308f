import { expect } from 'chai'
import { createSessionTx } from '../src/identity/sessions.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

/** Acceptance: every malformed request answers a 4xx problem, never 500, and writes nothing. */
describe('malformed input on the public routes', () => {
  const f = useWebStack({ worker: false })

  const routes: [string, Record<string, unknown>][] = [
    ['/sign-ups', { identifier: 'a@example.com', password: 'long enough password' }],
    ['/sign-ups/confirmation', { identifier: 'a@example.com', code: '123456', password: 'long enough password' }],
    ['/sessions', { identifier: 'a@example.com', password: 'whatever' }],
    ['/password-recoveries', { identifier: 'a@example.com' }],
    ['/password-recoveries/completion', { identifier: 'a@example.com', code: '123456', newPassword: 'long enough password' }],
  ]
  const bodies: [string, (valid: Record<string, unknown>) => string][] = [
    ['bad JSON', () => '{"identifier": "a@example.com",'],
    ['a JSON array', () => '[]'],
    ['a JSON string', () => '"a@example.com"'],
    ['an empty body', () => ''],
    ['an unknown field', (valid) => JSON.stringify({ ...valid, isAdmin: true })],
    ['a number identifier', (valid) => JSON.stringify({ ...valid, identifier: 5491155554455 })],
    ['a null identifier', (valid) => JSON.stringify({ ...valid, identifier: null })],
    ['an empty identifier', (valid) => JSON.stringify({ ...valid, identifier: '' })],
    ['an email without a domain', (valid) => JSON.stringify({ ...valid, identifier: 'alice@' })],
    ['a Cyrillic look-alike email', (valid) => JSON.stringify({ ...valid, identifier: 'аlice@example.com' })],
    ['fullwidth digits in a phone', (valid) => JSON.stringify({ ...valid, identifier: '+５４９１１５５５５４４５５' })],
    ['a phone without +', (valid) => JSON.stringify({ ...valid, identifier: '5491155554455' })],
    ['a phone too short', (valid) => JSON.stringify({ ...valid, identifier: '+1234' })],
    ['a 1 MiB body', (valid) => JSON.stringify({ ...valid, identifier: 'x'.repeat(1024 * 1024) })],
    ['an over-long identifier', (valid) => JSON.stringify({ ...valid, identifier: `${'a'.repeat(400)}@example.com` })],
    [
      'a number for every other field',
      (valid) =>
        JSON.stringify(
          Object.fromEntries(
            Object.entries(valid).map(([key, value]) => [key, key === 'identifier' && Object.keys(valid).length > 1 ? value : 123456]),
          ),
        ),
    ],
    ['a field missing', (valid) => JSON.stringify(Object.fromEntries(Object.entries(valid).slice(0, -1)))],
  ]

  for (const [path, valid] of routes) {
    it(`POST ${path} answers every malformed body with a 4xx problem and no rows`, async () => {
      const answers: string[] = []
      for (const [what, body] of bodies) {
        const response = await f.stack.call('POST', path, body(valid))
        if (response.status < 400 || response.status >= 500 || typeof response.body?.code !== 'string')
          answers.push(`${what}: ${response.status}`)
      }
      expect(answers, 'bodies not refused with a 4xx problem').to.deep.equal([])
      for (const table of [
        'identity.identities',
        'identity.login_identifiers',
        'identity.challenges',
        'outbox.security_outbox_messages',
        'identity.sessions',
      ]) {
        expect(await f.db.owner(table), table).to.have.length(0)
      }
    })
  }

  it('refuses a wrong or missing bearer token with 401, and a step-up body other than {} with a 4xx', async () => {
    expect((await f.stack.call('POST', '/step-ups')).status).to.equal(401)
    expect((await f.stack.call('POST', '/step-ups', {}, { authorization: 'Bearer not-a-real-session-token-at-all' })).status).to.equal(401)
    expect(
      (await f.stack.call('POST', '/sign-in-methods', { identifier: 'a@example.com' }, { authorization: 'Basic abc' })).status,
    ).to.equal(401)

    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('stepper'))
    const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, new Date()))
    for (const [body, status] of [
      [{ reason: 'because' }, 422],
      [[], 422],
      ['null', 400],
    ] as const) {
      const response = await f.stack.call('POST', '/step-ups', body, f.stack.bearer(token))
      expect(response.status, JSON.stringify(body)).to.equal(status)
    }
    expect(await f.db.owner('identity.challenges'), 'no challenge from a refused step-up').to.have.length(0)

    // Adding a sign-in method with a missing, forged, over-long or foreign elevation token: 403, nothing written.
    const other = await createVerifiedIdentity(f.db.owner, uniqueEmail('other'))
    const foreign = await createElevatedSession(f.db.owner, other.identityId)
    for (const elevation of [undefined, 'forged', 'x'.repeat(5_000), foreign['x-elevation-token']!]) {
      const response = await f.stack.call(
        'POST',
        '/sign-in-methods',
        { identifier: uniqueEmail('added') },
        { ...f.stack.bearer(token), ...(elevation ? { 'x-elevation-token': elevation } : {}) },
      )
      expect([response.status, response.body?.code], String(elevation?.length)).to.deep.equal([403, 'elevation_required'])
    }
    expect(await f.db.owner('identity.challenges'), 'no challenge from a refused addition').to.have.length(0)
    expect(await f.db.owner('identity.login_identifiers').whereNull('verified_at'), 'no claim from a refused addition').to.have.length(0)
  })

  it('POST /sign-in-methods/removals answers every malformed body, and a forged elevation, with a 4xx problem and removes nothing', async () => {
    const primary = uniqueEmail('keeper')
    const { identityId } = await createVerifiedIdentity(f.db.owner, primary)
    const elevated = await createElevatedSession(f.db.owner, identityId)
    const answers: string[] = []
    for (const [what, body] of bodies) {
      const response = await f.stack.call('POST', '/sign-in-methods/removals', body({ identifier: primary }), elevated)
      if (response.status < 400 || response.status >= 500 || typeof response.body?.code !== 'string')
        answers.push(`${what}: ${response.status}`)
    }
    expect(answers, 'bodies not refused with a 4xx problem').to.deep.equal([])
    const forged = await f.stack.call(
      'POST',
      '/sign-in-methods/removals',
      { identifier: primary },
      { ...elevated, 'x-elevation-token': 'forged' },
    )
    expect([forged.status, forged.body?.code]).to.deep.equal([403, 'elevation_required'])
    expect(await f.db.owner('identity.login_identifiers').where({ identity_id: identityId }).whereNotNull('verified_at')).to.have.length(1)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: primary }), 'no notice').to.have.length(0)
  })
})
