import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { courierKit } from './support/courier-kit.ts'
import { columnsContaining, eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString()
const uniqueCode = () => `C${randomBytes(6).toString('hex').toUpperCase()}`

describe('courier API: POST /v1/messages and GET /v1/messages/{id}', () => {
  const f = useWebStack()
  const kit = courierKit(f)

  /** What a refused request must not have written: messages (an envelope is inserted only with one), jobs, idempotency keys. */
  async function written() {
    const owner = f.db.owner
    const count = async (table: string) => Number((await owner(table).count({ n: '*' }))[0]!.n)
    return {
      messages: await count('outbox.security_outbox_messages'),
      jobs: Number((await owner('pgboss.job').where({ name: 'security-outbox' }).count({ n: '*' }))[0]!.n),
      idempotencyKeys: await count('platform.idempotency_keys'),
    }
  }

  it('delivers a verification code by email through the worker, and the secret is in no table, log line or answer', async () => {
    const { key } = await kit.apiKey()
    const email = uniqueEmail('courier')
    const code = uniqueCode()
    const accepted = await kit.send(key, {
      purpose: 'verification_code',
      channel: 'email',
      destination: email,
      secret: { code },
      expiresAt: inMinutes(10),
      data: { appName: 'Acme Notes' },
    })
    expect(accepted.status).to.equal(202)
    const messageId = String(accepted.body!.messageId)
    expect(JSON.stringify(accepted.body)).not.to.include(code)

    const [mail] = await eventually(async () => {
      const found = await inbox(f.stack.emulator.url, email)
      return found.length > 0 ? found : undefined
    }, 'the courier email')
    expect(mail!.body.text).to.include(code).and.to.include('Acme Notes')
    expect(mail!.subject).to.equal('Your Acme Notes verification code')

    const status = await eventually(async () => {
      const answer = await f.stack.call('GET', `/v1/messages/${messageId}`, undefined, { authorization: `Bearer ${key}` })
      return answer.body?.state === 'published' ? answer : undefined
    }, 'the message published')
    expect(status.body).to.include({ messageId, purpose: 'verification_code', channel: 'email', attemptCount: 1 })
    expect(status.body!.maskedDestination).not.to.equal(email)
    expect(status.body!.attempts).to.have.length(1)
    expect(JSON.stringify(status.body)).not.to.include(code)

    expect(await columnsContaining(f.db.owner, code), 'tables holding the code').to.deep.equal([])
    expect(f.logs.text()).not.to.include(code)
  })

  it('delivers a magic link on WhatsApp (the fake Wasender), and the link is in no table or log line', async () => {
    const { key } = await kit.apiKey()
    const phone = uniquePhone()
    const token = randomBytes(24).toString('base64url')
    const link = `https://app.example.test/magic#token=${token}`
    const accepted = await kit.send(key, {
      purpose: 'magic_link',
      channel: 'whatsapp',
      destination: phone,
      secret: { link },
      expiresAt: inMinutes(15),
    })
    expect(accepted.status).to.equal(202)
    const [message] = await eventually(async () => {
      const found = f.stack.wasender.accepted().filter((request) => request.to === phone)
      return found.length > 0 ? found : undefined
    }, 'the WhatsApp message')
    expect(message!.text).to.include(link)
    expect(await columnsContaining(f.db.owner, token), 'tables holding the token').to.deep.equal([])
    expect(f.logs.text()).not.to.include(token)
  })

  it('answers a repeated Idempotency-Key with the same body with the first messageId and sends once', async () => {
    const { key } = await kit.apiKey()
    const email = uniqueEmail('idempotent')
    const body = {
      purpose: 'verification_code',
      channel: 'email',
      destination: email,
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    }
    const first = await kit.send(key, body, 'order-42')
    const again = await kit.send(key, body, 'order-42')
    expect(first.status).to.equal(202)
    expect(again.status).to.equal(202)
    expect(again.body!.messageId).to.equal(first.body!.messageId)
    expect(again.headers.get('idempotent-replayed')).to.equal('true')
    const rows = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).count({ n: '*' })
    expect(Number(rows[0]!.n)).to.equal(1)
  })

  it('refuses the same Idempotency-Key with a different body with 409, writing nothing', async () => {
    const { key } = await kit.apiKey()
    const body = {
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('reuse'),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    }
    expect((await kit.send(key, body, 'order-43')).status).to.equal(202)
    const before = await written()
    const changed = await kit.send(key, { ...body, secret: { code: uniqueCode() } }, 'order-43')
    expect(changed.status).to.equal(422)
    expect(changed.body!.code).to.equal('idempotency_key_reused')
    expect(changed.headers.get('content-type')).to.match(/^application\/problem\+json/)
    expect(await written()).to.deep.equal(before)
  })

  it('a key scoped away from a purpose is refused with 403, writing nothing', async () => {
    const { key } = await kit.apiKey({ purposes: ['verification_code'] })
    const before = await written()
    const refused = await kit.send(key, {
      purpose: 'magic_link',
      channel: 'email',
      destination: uniqueEmail('scoped'),
      secret: { link: 'https://app.example.test/magic#token=abc' },
      expiresAt: inMinutes(10),
    })
    expect(refused.status).to.equal(403)
    expect(refused.body!.code).to.equal('api_key_scope')
    expect(await written()).to.deep.equal(before)
  })

  it('a revoked key learns exactly what an unknown or malformed one does: the same 401, nothing written', async () => {
    const member = await kit.staff()
    const revoked = await kit.apiKey({}, member)
    expect((await f.stack.call('DELETE', `/platform-admin/api-keys/${revoked.id}`, undefined, member.headers)).status).to.equal(204)
    const unknown = `sp_live_${randomBytes(16).toString('hex')}_${randomBytes(32).toString('base64url')}`
    const body = {
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('revoked'),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    }
    const before = await written()
    const answers = []
    for (const key of [revoked.key, unknown, 'not-a-key', `${revoked.key.slice(0, -1)}x`]) {
      const answer = await kit.send(key, body)
      answers.push({
        status: answer.status,
        body: answer.body,
        auth: answer.headers.get('www-authenticate'),
        type: answer.headers.get('content-type'),
      })
    }
    expect(answers[0]!.status).to.equal(401)
    for (const answer of answers.slice(1)) expect(answer).to.deep.equal(answers[0])
    expect(await written()).to.deep.equal(before)
  })

  it('answers every bad input with a 4xx problem and writes nothing', async () => {
    const { key } = await kit.apiKey()
    const good = {
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('bad'),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    }
    const cases: [string, unknown][] = [
      ['an unknown purpose', { ...good, purpose: 'password_reset_link' }],
      ['an unknown field', { ...good, extra: 1 }],
      ['a destination that is not an email', { ...good, destination: 'not-an-address' }],
      ['a phone number on the email channel', { ...good, destination: '+4915112345678' }],
      ['an email on a phone channel', { ...good, channel: 'whatsapp' }],
      ['a link for a code purpose', { ...good, secret: { link: 'https://app.example.test/x' } }],
      ['a code for a magic link', { ...good, purpose: 'magic_link' }],
      ['an http link', { ...good, purpose: 'magic_link', secret: { link: 'http://app.example.test/magic#token=abc' } }],
      ['a javascript link', { ...good, purpose: 'magic_link', secret: { link: 'javascript:alert(1)//abcdef' } }],
      ['a link with credentials', { ...good, purpose: 'magic_link', secret: { link: 'https://user:pw@app.example.test/m' } }],
      ['a link with markup', { ...good, purpose: 'magic_link', secret: { link: 'https://app.example.test/"><script>' } }],
      ['a code and a link', { ...good, secret: { code: '123456', link: 'https://app.example.test/x' } }],
      ['a code with markup', { ...good, secret: { code: '<b>1234</b>' } }],
      ['an expiry in the past', { ...good, expiresAt: inMinutes(-1) }],
      ['an expiry beyond 24 hours', { ...good, expiresAt: inMinutes(24 * 60 + 5) }],
      ['an expiry that is not a time', { ...good, expiresAt: 'tomorrow' }],
      ['an app name carrying a link', { ...good, data: { appName: 'Visit evil.example.com now' } }],
      ['an app name with a line break', { ...good, data: { appName: 'Acme\nReset here' } }],
      ['template data beyond appName', { ...good, data: { link: 'https://evil.example' } }],
      ['a channel the fleet does not have', { ...good, channel: 'sms', destination: uniquePhone() }],
      ['no body', undefined],
    ]
    const before = await written()
    for (const [what, body] of cases) {
      const answer = await kit.send(key, body)
      expect(answer.status, what).to.be.within(400, 499)
      expect(answer.headers.get('content-type'), what).to.match(/^application\/problem\+json/)
    }
    const noKey = await f.stack.call('POST', '/v1/messages', good, { authorization: `Bearer ${key}` })
    expect(noKey.status, 'no Idempotency-Key').to.equal(400)
    expect(noKey.body!.code).to.equal('idempotency_key_required')
    const malformed = await f.stack.rawCall('POST', '/v1/messages', '{"purpose":', {
      authorization: `Bearer ${key}`,
      'idempotency-key': 'x',
    })
    expect(malformed.status, 'malformed JSON').to.equal(400)
    expect(await written()).to.deep.equal(before)
  })

  it("a caller's user pumps through the courier: premium-rate, toll-free and invalid numbers are 422 unsupported_phone_number, nothing written", async () => {
    const { key } = await kit.apiKey({ purposes: ['verification_code'], channels: ['whatsapp'] })
    const before = await written()
    for (const [what, destination] of [
      ['a premium-rate number (GB 09…)', '+449098790000'],
      ['a premium-rate number (US 900)', '+19005550123'],
      ['a toll-free number (DE 0800)', '+498001234567'],
      ['a number that cannot exist (Ofcom drama range)', '+447700900123'],
      ['a landline, refused by default', '+442079460000'],
    ] as const) {
      const answer = await kit.send(key, {
        purpose: 'verification_code',
        channel: 'whatsapp',
        destination,
        secret: { code: uniqueCode() },
        expiresAt: inMinutes(10),
      })
      expect(answer.status, what).to.equal(422)
      expect(answer.body!.code, what).to.equal('unsupported_phone_number')
    }
    expect(await written()).to.deep.equal(before)
    const mobile = await kit.send(key, {
      purpose: 'verification_code',
      channel: 'whatsapp',
      destination: uniquePhone(),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    })
    expect(mobile.status, 'a valid mobile still goes').to.equal(202)
  })

  it("limits a key's requests per minute with 429 and Retry-After", async () => {
    const { key } = await kit.apiKey({ requestsPerMinute: 2 })
    const body = () => ({
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('rate'),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    })
    // Per calendar minute: five at once meet the limit even if a minute's boundary falls between them (at most 2 + 2 pass).
    const answers = []
    for (let i = 0; i < 5; i += 1) answers.push(await kit.send(key, body()))
    expect(answers.filter((answer) => answer.status === 202).length).to.be.within(2, 4)
    const limited = answers.find((answer) => answer.status !== 202)!
    expect(limited.status).to.equal(429)
    expect(limited.body!.code).to.equal('rate_limited')
    expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60)
  })

  it("spends a key's destination budget on the canonical mailbox: a +tag variant is the same inbox", async () => {
    const { key } = await kit.apiKey({ perDestinationPerHour: 1 })
    const [local, domain] = uniqueEmail('budget').split('@')
    const send = (destination: string) =>
      kit.send(key, {
        purpose: 'verification_code',
        channel: 'email',
        destination,
        secret: { code: uniqueCode() },
        expiresAt: inMinutes(10),
      })
    expect((await send(`${local}@${domain}`)).status).to.equal(202)
    const before = await written()
    const refused = await send(`${local}+again@${domain}`)
    expect(refused.status).to.equal(429)
    expect(refused.body!.code).to.equal('destination_budget_exhausted')
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3_600)
    expect(await written()).to.deep.equal(before)
    // Another key's budget is its own.
    const other = await kit.apiKey({ perDestinationPerHour: 1 })
    expect(
      (
        await kit.send(other.key, {
          purpose: 'verification_code',
          channel: 'email',
          destination: `${local}@${domain}`,
          secret: { code: uniqueCode() },
          expiresAt: inMinutes(10),
        })
      ).status,
    ).to.equal(202)
  })

  it("shows a message only to the key that sent it: another key's lookup is the unknown id's 404", async () => {
    const mine = await kit.apiKey()
    const theirs = await kit.apiKey()
    const accepted = await kit.send(mine.key, {
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('mine'),
      secret: { code: uniqueCode() },
      expiresAt: inMinutes(10),
    })
    const id = String(accepted.body!.messageId)
    const other = await f.stack.call('GET', `/v1/messages/${id}`, undefined, { authorization: `Bearer ${theirs.key}` })
    const unknown = await f.stack.call('GET', `/v1/messages/${crypto.randomUUID()}`, undefined, { authorization: `Bearer ${theirs.key}` })
    expect(other.status).to.equal(404)
    expect(other.body).to.deep.equal(unknown.body)
  })

  it('never sends a message whose expiresAt passed while the provider was down', async () => {
    const { key } = await kit.apiKey()
    const phone = uniquePhone()
    f.stack.wasender.behave(() => ({ kind: 'status', status: 503 }))
    try {
      const accepted = await kit.send(key, {
        purpose: 'verification_code',
        channel: 'whatsapp',
        destination: phone,
        secret: { code: uniqueCode() },
        expiresAt: new Date(Date.now() + 3_000).toISOString(),
      })
      expect(accepted.status).to.equal(202)
      const id = String(accepted.body!.messageId)
      // The first attempt fails; the next would fall after the expiry, so the message is closed instead.
      const closed = await eventually(async () => {
        const answer = await f.stack.call('GET', `/v1/messages/${id}`, undefined, { authorization: `Bearer ${key}` })
        return answer.body?.state === 'dead_lettered' ? answer : undefined
      }, 'the message dead-lettered')
      expect(closed.body!.deadLetterReason).to.equal('challenge_expired')
    } finally {
      f.stack.wasender.behave(() => ({ kind: 'accept' }))
    }
    expect(f.stack.wasender.accepted().filter((request) => request.to === phone)).to.deep.equal([])
  })
})
