import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { assertDocumentedAnswer } from './support/api-check.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { sendBytes, sendRaw, type RawAnswer } from './support/raw-http.ts'
import { useWebStack } from './support/web-stack.ts'

const WASENDER_SECRET = 'wasender-secret-for-hostile-input'
const BASE = '/platform-admin/security-outbox'

type Document = { paths: Record<string, Record<string, unknown>> }

/** A client mistake is answered as one: a 4xx RFC 9457 problem that names the request. */
function expectClientProblem(answer: RawAnswer, what: string): void {
  expect(answer.status, `${what}: ${answer.text.slice(0, 200)}`).to.be.within(400, 499)
  expect(answer.headers.get('content-type'), what).to.match(/^application\/problem\+json/)
  expect(answer.headers.get('x-request-id'), what).to.be.a('string').and.not.equal('')
  const body = JSON.parse(answer.text) as { status: number; code: string }
  expect(body.status, what).to.equal(answer.status)
  expect(body.code, what).to.be.a('string')
}

/** Each mistake a fuzzer found from outside, sent the way it sent it. */
describe('hostile input gets a clear 4xx', () => {
  const f = useWebStack({ worker: false, clientLimitPerMinute: 60, webhooks: { WASENDER_WEBHOOK_SECRET: WASENDER_SECRET } })
  let document: Document
  const operations = () =>
    Object.entries(document.paths).flatMap(([template, item]) =>
      Object.keys(item).map((method) => ({ method: method.toUpperCase(), template, path: template.replace(/\{[^}]+\}/g, uuidv7()) })),
    )

  before(async () => {
    document = (await f.stack.call('GET', '/openapi.json')).body as unknown as Document
  })

  async function staff() {
    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('staff'))
    await f.db.owner('platform.staff_members').insert({ identity_id: identityId })
    return await createElevatedSession(f.db.owner, identityId)
  }

  it('a body that is not encoded as its Content-Encoding says (gzip, deflate, br) is a 400 problem on every operation', async () => {
    const body = JSON.stringify({ identifier: 'a@example.com', password: 'correct horse battery' })
    for (const { method, path } of operations()) {
      for (const encoding of ['gzip', 'deflate', 'br']) {
        const headers = { 'content-type': 'application/json', 'content-encoding': encoding }
        const answer = await sendRaw(f.stack.web.url, { method, path, headers, body })
        const what = `${method} ${path} content-encoding: ${encoding}`
        expect(answer.status, what).to.not.equal(500)
        expectClientProblem(answer, what)
        assertDocumentedAnswer({ method, url: path }, answer)
      }
    }
  })

  it('a path parameter with a broken percent-encoding is a 4xx problem on every route that has one, and beyond', async () => {
    const broken = ['%', '%ZZ', '%C0%AF', '%ED%A0%80', '%E0%A4%A']
    const targets = operations().filter(({ template }) => template.includes('{'))
    expect(targets.length).to.be.greaterThan(3)
    for (const { method, template } of targets) {
      for (const bad of broken) {
        const path = template.replace(/\{[^}]+\}/g, bad)
        const answer = await sendRaw(f.stack.web.url, { method, path, headers: await staff() })
        expectClientProblem(answer, `${method} ${path}`)
        assertDocumentedAnswer({ method, url: path }, answer)
      }
    }
    for (const path of ['/platform-admin/suppressions/%ZZ', '/organizations/%ZZ/invitations/%C0%AF', `${BASE}/messages/%ED%A0%80`]) {
      expectClientProblem(await sendRaw(f.stack.web.url, { method: 'GET', path }), `GET ${path}`)
    }
  })

  it("header bytes Node's parser refuses are answered as problems with a request id: NUL, a bad name, over-long headers, raw full-width digits", async () => {
    const cases: [string, string | Buffer, number][] = [
      ['a NUL in a header value', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n', 400],
      ['a space in a header name', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n', 400],
      ['20 KiB of headers', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      [
        'full-width digits sent raw in the path',
        Buffer.concat([Buffer.from(`GET ${BASE}/messages/`), Buffer.from('１２３４', 'utf8'), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]),
        400,
      ],
    ]
    for (const [what, bytes, status] of cases) {
      const answer = await sendBytes(f.stack.web.url, bytes)
      expect(answer.status, what).to.equal(status)
      expectClientProblem(answer, what)
    }
    expect((await f.stack.call('GET', '/healthz')).status, 'still serving').to.equal(200)
  })

  it('full-width digits in a uuid path parameter get the same answer as any other bad id', async () => {
    const auth = await staff()
    const fullWidth = '０１９３００００-００００-７０００-８０００-０００００００００００１'
    const answers = await Promise.all(
      ['not-a-uuid', fullWidth].map((id) => f.stack.call('GET', `${BASE}/messages/${encodeURIComponent(id)}`, undefined, auth)),
    )
    expect(answers.map((a) => [a.status, a.body?.code])).to.deep.equal([
      [404, 'message_not_found'],
      [404, 'message_not_found'],
    ])
  })

  describe('the Idempotency-Key of a reissue answers the first result, whatever it was', () => {
    async function attempt(auth: Record<string, string>, messageId: string, key: string) {
      return await f.stack.call('POST', `${BASE}/dead-letters/${messageId}/reissues`, undefined, { ...auth, 'idempotency-key': key })
    }

    it('a first 409 stays 409 on its repeat, even once the refusal no longer holds, and nothing is sent', async () => {
      const auth = await staff()
      const dead = await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('locked-out'), failures: ['UNAVAILABLE'] })
      await f.db.owner('identity.challenges').where({ id: dead.challengeId }).update({ revoked_at: new Date() })
      const first = await attempt(auth, dead.messageId, 'first-refused')
      expect([first.status, first.body?.code]).to.deep.equal([409, 'challenge_revoked'])
      await f.db.owner('identity.challenges').where({ id: dead.challengeId }).update({ revoked_at: null })
      const repeat = await attempt(auth, dead.messageId, 'first-refused')
      expect([repeat.status, repeat.body?.code]).to.deep.equal([409, 'challenge_revoked'])
      expect(repeat.headers.get('idempotent-replayed')).to.equal('true')
      expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(1)
      // A new key is a new request: it does the work.
      expect((await attempt(auth, dead.messageId, 'second-key')).status).to.equal(201)
    })

    it('a first 201 stays 201 on its repeat, with the same body, and enqueues one message', async () => {
      const auth = await staff()
      const dead = await insertFailedDeadLetter(f.db.owner, { destination: uniqueEmail('locked-out'), failures: ['UNAVAILABLE'] })
      const first = await attempt(auth, dead.messageId, 'first-done')
      expect(first.status).to.equal(201)
      const repeat = await attempt(auth, dead.messageId, 'first-done')
      expect(repeat).to.deep.include({ status: 201, body: first.body })
      expect(repeat.headers.get('idempotent-replayed')).to.equal('true')
      expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
    })
  })

  it('POST /webhooks/wasender with a valid signature refuses what its schema refuses: another content type, a missing field', async () => {
    const signed = { 'x-webhook-signature': WASENDER_SECRET }
    const post = (body: string, contentType: string) =>
      sendRaw(f.stack.web.url, { method: 'POST', path: '/webhooks/wasender', headers: { ...signed, 'content-type': contentType }, body })
    const cases: [string, string, string, number][] = [
      ['text/plain', '{"event":"messages.update","data":{}}', 'text/plain', 415],
      ['no content type', '{"event":"messages.update","data":{}}', '', 415],
      ['{}', '{}', 'application/json', 400],
      ['no data', '{"event":"messages.update"}', 'application/json', 400],
      ['a number event', '{"event":5,"data":{}}', 'application/json', 400],
      ['an array', '[]', 'application/json', 400],
    ]
    for (const [what, body, type, status] of cases) {
      const answer = await post(body, type)
      expect(answer.status, what).to.equal(status)
      expectClientProblem(answer, what)
      assertDocumentedAnswer({ method: 'POST', url: '/webhooks/wasender' }, answer)
    }
    const valid = await post('{"event":"messages.upsert","data":{}}', 'application/json')
    expect([valid.status, valid.text]).to.deep.equal([200, '{"outcomes":["ignored"]}'])
  })

  it('the per-client limit counts malformed requests too: 70 bodies of {} from one client meet 429s', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 70; i += 1) statuses.push((await f.stack.call('POST', '/password-recoveries', {})).status)
    expect(
      statuses.filter((status) => status === 429),
      statuses.join(' '),
    ).to.have.length.greaterThan(0)
    expect(statuses.filter((status) => status !== 429 && status !== 422)).to.deep.equal([])
  })

  it('accepts the bearer scheme in any case (RFC 9110 §11.1)', async () => {
    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('casual'))
    const token = (await createElevatedSession(f.db.owner, identityId)).authorization!.split(' ')[1]!
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR'])
      expect((await f.stack.call('GET', '/sessions', undefined, { authorization: `${scheme} ${token}` })).status, scheme).to.equal(200)
  })

  it('answers OPTIONS and HEAD, which the document does not describe, 405 with Allow', async () => {
    for (const [method, path, allow] of [
      ['OPTIONS', '/sessions', 'GET, POST, DELETE'],
      ['OPTIONS', '/healthz', 'GET'],
      ['HEAD', '/healthz', 'GET'],
      ['HEAD', '/openapi.json', 'GET'],
      ['PUT', '/sign-ups', 'POST'],
    ] as const) {
      const answer = await sendRaw(f.stack.web.url, { method, path })
      expect([answer.status, answer.headers.get('allow')], `${method} ${path}`).to.deep.equal([405, allow])
      if (method !== 'HEAD') expectClientProblem(answer, `${method} ${path}`)
    }
  })

  it('routes exactly as documented: /HEALTHZ, /healthz/ and /openapi.json/ are 404', async () => {
    for (const path of ['/HEALTHZ', '/healthz/', '/openapi.json/', '/Sessions', '/sign-ups/']) {
      const method = path.startsWith('/sign-ups') ? 'POST' : 'GET'
      const answer = await sendRaw(f.stack.web.url, { method, path, headers: { 'content-type': 'application/json' }, body: '{}' })
      expect([answer.status, JSON.parse(answer.text).code], path).to.deep.equal([404, 'not_found'])
    }
  })
})
