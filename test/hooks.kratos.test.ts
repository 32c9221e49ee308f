import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { kratosAuthorized, readKratosCourier } from '../src/hooks/kratos.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { columnsContaining, eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { rowCounts } from './support/row-counts.ts'
import { useWebStack } from './support/web-stack.ts'

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const RECOVERY_CODE = fixture('kratos-courier-recovery-code.json')
const VERIFICATION_LINK = fixture('kratos-courier-verification-link.json')

/** The default Jsonnet's body for another template type (its other fields null, as Kratos sends them). */
const courierBody = (templateType: string, fields: Record<string, unknown>) => ({
  ...RECOVERY_CODE,
  recovery_code: null,
  template_type: templateType,
  ...fields,
})
/** The messages read (without their sameness); a refusal fails the test. */
const read = (body: unknown) => {
  const reading = readKratosCourier(body)
  if (!('messages' in reading)) throw new Error(`refused: ${reading.refusal}`)
  return reading.messages.map((m) => ({
    purpose: m.purpose,
    channel: m.channel,
    destination: m.destination,
    secret: m.secret,
    ttlSeconds: m.ttlSeconds,
  }))
}

describe('reading Ory Kratos courier requests', () => {
  const link = VERIFICATION_LINK.verification_url

  it('reads the default body of recovery_code_valid as a password recovery code, never its rendered subject or body', () => {
    expect(read(RECOVERY_CODE)).to.deep.equal([
      {
        purpose: 'password_recovery',
        channel: 'email',
        destination: 'foo@example.org',
        secret: { code: '12345678' },
        ttlSeconds: undefined,
      },
    ])
  })

  it('reads verification_valid as a link', () => {
    expect(read(VERIFICATION_LINK)).to.deep.equal([
      { purpose: 'magic_link', channel: 'email', destination: 'foo@example.org', secret: { link }, ttlSeconds: undefined },
    ])
  })

  for (const [templateType, fields, purpose, secret] of [
    [
      'recovery_valid',
      { recovery_url: 'https://www.ory.sh/recovery?token=abc' },
      'magic_link',
      { link: 'https://www.ory.sh/recovery?token=abc' },
    ],
    [
      'verification_code_valid',
      { verification_code: '445566', verification_url: 'https://www.ory.sh/verify?flow=1' },
      'verification_code',
      { code: '445566' },
    ],
    ['login_code_valid', { login_code: '778899' }, 'verification_code', { code: '778899' }],
    ['registration_code_valid', { registration_code: '101112' }, 'sign_up', { code: '101112' }],
  ] as const) {
    it(`reads ${templateType} as ${purpose}`, () => {
      expect(read(courierBody(templateType, fields))).to.deep.equal([
        { purpose, channel: 'email', destination: 'foo@example.org', secret, ttlSeconds: undefined },
      ])
    })
  }

  it('takes the lifetime and the channel from the documented Jsonnet’s extra fields, and a phone recipient as SMS', () => {
    expect(read(courierBody('login_code_valid', { login_code: '778899', expires_in_minutes: 10 }))[0]).to.include({ ttlSeconds: 600 })
    const sms = courierBody('login_code_valid', { login_code: '778899', recipient: '+4915112345678', to: '+4915112345678' })
    expect(read(sms)[0]).to.include({ channel: 'phone', destination: '+4915112345678' })
    expect(read({ ...sms, message_type: 'sms' })[0]).to.include({ channel: 'phone' })
    expect(read({ ...courierBody('login_code_valid', { login_code: '778899' }), message_type: 'email' })[0]).to.include({
      channel: 'email',
    })
  })

  it('refuses the test stub and every template type Kratos does not queue', () => {
    for (const templateType of ['stub', 'some_future_template', '__proto__', 'constructor'])
      expect(readKratosCourier(courierBody(templateType, {})), templateType).to.deep.equal({ refusal: 'unsupported_kind' })
  })

  it('refuses a body whose template type lacks its code, or with a phone number that is not one', () => {
    expect(readKratosCourier(courierBody('login_code_valid', {}))).to.deep.equal({ refusal: 'malformed' })
    expect(readKratosCourier(courierBody('recovery_code_valid', { recovery_code: 'no spaces' }))).to.deep.equal({ refusal: 'malformed' })
    expect(readKratosCourier(courierBody('login_code_valid', { login_code: '123456', recipient: '12', to: null }))).to.deep.equal({
      refusal: 'invalid_destination',
    })
    expect(readKratosCourier({ template_type: 'recovery_code_valid' })).to.deep.equal({ refusal: 'malformed' })
  })

  it('reads a number as the identity flows do (libphonenumber): +0… and other unreadable ones are no number, a spelled one is its E.164', () => {
    const destination = (to: string) => {
      const reading = readKratosCourier(courierBody('login_code_valid', { login_code: '123456', recipient: to, to, message_type: 'sms' }))
      return 'messages' in reading ? reading.messages[0]!.destination : reading.refusal
    }
    // The regex the adapter had took `+` and 8–15 digits (+0… passed, `+44 7911…` did not): now one reading, one refusal.
    for (const to of ['+01234567890', '+0447911123456', '+999123456789', '+12']) {
      expect(parseIdentifier(to), `${to}: the identity flows read no number`).to.equal(undefined)
      expect(destination(to), to).to.equal('invalid_destination')
    }
    expect(destination('+44 7911 123456'), 'spelled with spaces').to.equal('+447911123456')
    expect(destination('+4407911123456'), 'with the trunk zero').to.equal('+447911123456')
  })

  it('accepts the key as a bearer token or as the basic-auth password, and nothing else', () => {
    const key = 'k'.repeat(40)
    expect(kratosAuthorized(key, `Bearer ${key}`)).to.equal(true)
    expect(kratosAuthorized(key, `Basic ${Buffer.from(`kratos:${key}`).toString('base64')}`)).to.equal(true)
    for (const header of [
      undefined,
      '',
      key,
      `Bearer ${key}x`,
      `Bearer ${key.slice(1)}`,
      `Basic ${Buffer.from(key).toString('base64')}`,
      `Token ${key}`,
    ])
      expect(kratosAuthorized(key, header), String(header)).to.equal(false)
  })
})

describe('the Kratos courier hook end to end (POST /hooks/kratos/courier)', () => {
  const KEY = 'kratos-courier-key-for-tests-0123456789'
  const f = useWebStack({
    webhooks: { KRATOS_COURIER_API_KEY: KEY, KRATOS_LINK_ORIGINS: ['https://www.ory.sh', 'https://auth.example.org'] },
  })
  const bearer = { authorization: `Bearer ${KEY}` }
  const basic = { authorization: `Basic ${Buffer.from(`kratos:${KEY}`).toString('base64')}` }
  const post = (body: unknown, headers: Record<string, string> = bearer) => f.stack.call('POST', '/hooks/kratos/courier', body, headers)
  const to = (body: Record<string, unknown>, address: string) => ({ ...body, recipient: address, to: address })
  const emailsTo = (address: string) =>
    eventually(async () => {
      const emails = await inbox(f.stack.emulator.url, address)
      return emails.length > 0 ? emails : undefined
    }, `an email to ${address}`)

  it('delivers the default body of recovery_code_valid through the worker as its code', async () => {
    const address = uniqueEmail('kratos-recovery')
    const answer = await post(to(RECOVERY_CODE, address))
    expect([answer.status, answer.body]).to.deep.equal([200, {}])
    expect((await emailsTo(address))[0]?.body.text).to.include('12345678')
  })

  it('delivers verification_valid as its link, authenticated with basic auth', async () => {
    const address = uniqueEmail('kratos-verify')
    expect((await post(to(VERIFICATION_LINK, address), basic)).status).to.equal(200)
    expect((await emailsTo(address))[0]?.body.text).to.include(VERIFICATION_LINK.verification_url)
  })

  for (const [templateType, fields, secret] of [
    [
      'recovery_valid',
      { recovery_url: 'https://auth.example.org/recovery?token=r3c0v3ry' },
      'https://auth.example.org/recovery?token=r3c0v3ry',
    ],
    ['verification_code_valid', { verification_code: '445566' }, '445566'],
    ['login_code_valid', { login_code: '778899' }, '778899'],
    ['registration_code_valid', { registration_code: '101112' }, '101112'],
  ] as const) {
    it(`delivers ${templateType} through the worker`, async () => {
      const address = uniqueEmail(templateType)
      expect((await post(to(courierBody(templateType, fields), address))).status).to.equal(200)
      expect((await emailsTo(address))[0]?.body.text).to.include(secret)
    })
  }

  it('delivers a login code to a phone recipient on the fleet’s phone channel', async () => {
    const phone = uniquePhone()
    expect((await post(to(courierBody('login_code_valid', { login_code: '246810', message_type: 'sms' }), phone))).status).to.equal(200)
    const sent = await eventually(async () => f.stack.wasender.requests.find((request) => request.to === phone), 'the WhatsApp message')
    expect(sent.text).to.include('246810')
  })

  describe('attacks on the hook', () => {
    const refusedWithNothingWritten = async (body: unknown, headers: Record<string, string>, status: number, code: string) => {
      const before = await rowCounts(f.db.owner)
      const answer = await post(body, headers)
      expect(answer.status).to.equal(status)
      expect(answer.body?.code).to.equal(code)
      // A refused credential spends the client's per-client limit: that one hit is all it writes.
      const counted = status === 401 ? { 'platform.rate_limit_hits': before['platform.rate_limit_hits']! + 1 } : {}
      expect(await rowCounts(f.db.owner)).to.deep.equal({ ...before, ...counted })
    }

    it('a caller without the key, or with a wrong one, is refused 401 with nothing written', async () => {
      const body = to(RECOVERY_CODE, uniqueEmail('forged'))
      const attempts: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${KEY}x` },
        { authorization: `Basic ${Buffer.from(`kratos:${KEY.slice(1)}`).toString('base64')}` },
        { 'x-api-key': KEY },
      ]
      for (const headers of attempts) await refusedWithNothingWritten(body, headers, 401, 'invalid_signature')
    })

    it('a number libphonenumber cannot read (+0…) is refused 422 invalid_destination with nothing written, as the identity flows refuse it 422', async () => {
      for (const number of ['+01234567890', '+12']) {
        const body = to(courierBody('login_code_valid', { login_code: '246810', message_type: 'sms' }), number)
        await refusedWithNothingWritten(body, bearer, 422, 'invalid_destination')
        const signUp = await f.stack.call('POST', '/sign-ups', { identifier: number, password: 'correct horse battery staple 9' })
        expect([signUp.status, signUp.body?.code], number).to.deep.equal([422, 'invalid_identifier'])
      }
    })

    it('a template type Kratos does not queue is 422 and a body that is not Kratos’ 400, both with nothing written', async () => {
      await refusedWithNothingWritten(to(courierBody('stub', {}), uniqueEmail('unknown')), bearer, 422, 'unsupported_kind')
      await refusedWithNothingWritten({ template_type: 'recovery_code_valid' }, bearer, 400, 'malformed')
    })

    it('a message Kratos retries after an ambiguous answer is sent once', async () => {
      const address = uniqueEmail('kratos-retry')
      for (let attempt = 0; attempt < 3; attempt += 1) expect((await post(to(RECOVERY_CODE, address))).status).to.equal(200)
      await emailsTo(address)
      expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: address })).to.have.length(1)
    })

    it('leaves the code and the link out of every table, log line and answer', async () => {
      const address = uniqueEmail('kratos-secret')
      const body = to(courierBody('verification_valid', { verification_url: 'https://auth.example.org/verify?token=s3cr3tT0k3n' }), address)
      const answer = await post(body)
      await emailsTo(address)
      for (const secret of ['s3cr3tT0k3n', '12345678']) {
        expect(await columnsContaining(f.db.owner, secret), secret).to.deep.equal([])
        expect(f.logs.text(), secret).not.to.include(secret)
        expect(JSON.stringify(answer.body)).not.to.include(secret)
      }
    })
  })

  it('answers 404, as an unknown route does, to every method on the Supabase hooks it was not configured with', async () => {
    const headers = { 'webhook-id': 'x', 'webhook-timestamp': '1', 'webhook-signature': 'v1,x' }
    const unknown = await f.stack.rawCall('POST', '/hooks/supabase/elsewhere', {}, headers)
    for (const path of ['/hooks/supabase/send-email', '/hooks/supabase/send-sms'])
      for (const method of ['POST', 'GET', 'OPTIONS']) {
        const answer = await f.stack.rawCall(method, path, method === 'POST' ? {} : undefined, headers)
        expect([answer.status, answer.body], `${method} ${path}`).to.deep.equal([404, unknown.body])
      }
  })
})
