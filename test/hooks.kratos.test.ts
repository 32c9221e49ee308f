import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { kratosAuthorized, readKratosCourier } from '../src/hooks/kratos.ts'

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

  it('refuses the invalid-recipient notices and every template type without a secret', () => {
    for (const templateType of [
      'recovery_code_invalid',
      'recovery_invalid',
      'verification_code_invalid',
      'verification_invalid',
      'verifiable_address_changed',
      'stub',
      '__proto__',
    ])
      expect(readKratosCourier(courierBody(templateType, {})), templateType).to.deep.equal({ refusal: 'unsupported_kind' })
  })

  it('refuses a body whose template type lacks its code, or with a phone number that is not one', () => {
    expect(readKratosCourier(courierBody('login_code_valid', {}))).to.deep.equal({ refusal: 'malformed' })
    expect(readKratosCourier(courierBody('recovery_code_valid', { recovery_code: 'no spaces' }))).to.deep.equal({ refusal: 'malformed' })
    expect(readKratosCourier(courierBody('login_code_valid', { login_code: '1', recipient: '12', to: null }))).to.deep.equal({
      refusal: 'malformed',
    })
    expect(readKratosCourier({ template_type: 'recovery_code_valid' })).to.deep.equal({ refusal: 'malformed' })
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
