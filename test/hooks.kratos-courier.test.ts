import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { readKratosCourier } from '../src/hooks/kratos.ts'
import { eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

// What Kratos b86338d posts for each template type and channel, with its default body and with
// docs/hooks.md's recommended one (test/fixtures/hooks/README.md).
type Body = Record<string, unknown> & { recipient: string; template_type: string }
const fixture = (name: string): Record<string, Body> =>
  JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const DEFAULT = fixture('kratos-courier-default-body.json')
const RECOMMENDED = fixture('kratos-courier-recommended-body.json')

const read = (body: unknown) => {
  const reading = readKratosCourier(body)
  if (!('messages' in reading)) throw new Error(`refused: ${reading.refusal}`)
  return reading.messages.map(({ purpose, channel, destination, secret, ttlSeconds }) => ({
    purpose,
    channel,
    destination,
    secret,
    ttlSeconds,
  }))
}
/** A fixture sent to another recipient: Kratos puts the address in `recipient` and `to`, the rendered text unchanged. */
const to = (body: Body, address: string): Body => ({ ...body, recipient: address, to: address })

describe('Ory Kratos courier bodies as Kratos sends them', () => {
  it('reads every template type Kratos queues, on both channels and with both bodies, into a message', () => {
    for (const [name, bodies] of [
      ['default', DEFAULT],
      ['recommended', RECOMMENDED],
    ] as const)
      for (const [key, body] of Object.entries(bodies)) expect(read(body), `${name} ${key}`).to.have.length(1)
  })

  it('reads an SMS recovery code from verification_code, where Kratos’ SMS template puts it (item 1)', () => {
    for (const body of [DEFAULT['sms/recovery_code_valid'], RECOMMENDED['sms/recovery_code_valid']])
      expect(read(body)[0]).to.deep.include({
        purpose: 'password_recovery',
        channel: 'phone',
        destination: '+15555550100',
        secret: { code: '517204' },
      })
  })

  it('with Kratos’ default body, takes a login or registration code from the text Kratos rendered (item 7)', () => {
    for (const [key, purpose, code] of [
      ['email/login_code_valid', 'verification_code', '305918'],
      ['sms/login_code_valid', 'verification_code', '305918'],
      ['email/registration_code_valid', 'sign_up', '640271'],
      ['sms/registration_code_valid', 'sign_up', '640271'],
    ] as const)
      expect(read(DEFAULT[key])[0], key).to.deep.include({ purpose, secret: { code } })
    // Text that does not name one code unambiguously is no code: refused, never guessed.
    for (const text of ['Your code: 123456 or 654321', 'Your code is on its way', 'Code 12345'])
      expect(readKratosCourier({ ...DEFAULT['email/login_code_valid'], subject: '', body: text }), text).to.deep.equal({
        refusal: 'malformed',
      })
  })

  it('gives a code Kratos’ default lifetime (1 h) and clamps expires_in_minutes into 1–1440 instead of refusing it (item 7)', () => {
    // The default body says nothing of the lifetime: the adapter's default applies (the end-to-end test below sees 1 h).
    expect(read(DEFAULT['email/recovery_code_valid'])[0]?.ttlSeconds).to.equal(undefined)
    expect(read(RECOMMENDED['email/login_code_valid'])[0]?.ttlSeconds).to.equal(3_600)
    expect(read({ ...RECOMMENDED['email/login_code_valid'], expires_in_minutes: 0 })[0]?.ttlSeconds).to.equal(60)
    expect(read({ ...RECOMMENDED['email/login_code_valid'], expires_in_minutes: 10_080 })[0]?.ttlSeconds).to.equal(86_400)
  })

  it('reads the address-changed, key-added and unknown-address messages as security notices without a secret (item 6)', () => {
    for (const [key, event] of [
      ['email/verifiable_address_changed', 'verifiable_address_changed'],
      ['sms/verifiable_address_changed', 'verifiable_address_changed'],
      ['email/authenticator_key_added', 'authenticator_key_added'],
      ['sms/authenticator_key_added', 'authenticator_key_added'],
      ['email/recovery_invalid', 'recovery_unknown_address'],
      ['email/recovery_code_invalid', 'recovery_unknown_address'],
      ['email/verification_invalid', 'verification_unknown_address'],
      ['email/verification_code_invalid', 'verification_unknown_address'],
    ] as const)
      expect(read(DEFAULT[key])[0], key).to.deep.include({ purpose: 'security_notice', secret: { notice: { event, identifier: '' } } })
  })
})

describe('the Kratos courier end to end, with the bodies Kratos sends', () => {
  const KEY = 'kratos-courier-key-for-tests-0123456789'
  const f = useWebStack({ webhooks: { KRATOS_COURIER_API_KEY: KEY } })
  const post = (body: unknown) => f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${KEY}` })
  const emailsTo = (address: string) =>
    eventually(async () => {
      const emails = await inbox(f.stack.emulator.url, address)
      return emails.length > 0 ? emails : undefined
    }, `an email to ${address}`)
  const whatsAppTo = (phone: string) =>
    eventually(async () => f.stack.wasender.requests.find((request) => request.to === phone), `the message to ${phone}`)

  it('delivers an SMS recovery code sent with Kratos’ default body (item 1)', async () => {
    const phone = uniquePhone()
    const answer = await post(to(DEFAULT['sms/recovery_code_valid']!, phone))
    expect([answer.status, answer.body]).to.deep.equal([200, {}])
    expect((await whatsAppTo(phone)).text).to.include('517204')
  })

  it('delivers a login code sent with Kratos’ default body, which carries it only in the rendered text (item 7)', async () => {
    const address = uniqueEmail('kratos-login-default')
    expect((await post(to(DEFAULT['email/login_code_valid']!, address))).status).to.equal(200)
    expect((await emailsTo(address))[0]?.body.text).to.include('305918')
    const [row] = await f.db.owner('outbox.security_outbox_messages').where({ destination: address }).select('created_at', 'expires_at')
    expect((row.expires_at.getTime() - row.created_at.getTime()) / 1000, 'Kratos’ default code lifespan').to.be.within(3_599, 3_601)
  })

  it('delivers a recommended-body message whose lifetime Kratos rounded down to 0 minutes (item 7)', async () => {
    const address = uniqueEmail('kratos-zero')
    expect((await post({ ...to(RECOMMENDED['email/registration_code_valid']!, address), expires_in_minutes: 0 })).status).to.equal(200)
    expect((await emailsTo(address))[0]?.body.text).to.include('640271')
  })

  it('delivers verifiable_address_changed and an unknown-address recovery as security notices (item 6)', async () => {
    const changed = uniqueEmail('kratos-changed')
    expect((await post(to(DEFAULT['email/verifiable_address_changed']!, changed))).status).to.equal(200)
    const [notice] = await emailsTo(changed)
    expect(notice?.subject).to.match(/security notice/i)
    expect(notice?.body.text).to.match(/address .* was changed/i)
    const unknown = uniqueEmail('kratos-unknown')
    expect((await post(to(DEFAULT['email/recovery_code_invalid']!, unknown))).status).to.equal(200)
    expect((await emailsTo(unknown))[0]?.body.text).to.match(/no account/i)
    const rows = await f.db.owner('outbox.security_outbox_messages').whereIn('destination', [changed, unknown]).select('purpose')
    expect(rows.map((row) => row.purpose)).to.deep.equal(['security_notice', 'security_notice'])
  })
})

/**
 * An account-change notice is what tells an owner that somebody else is in the account, so it is
 * one notice per change: Kratos' retries send nothing twice, a later change is sent. Kratos stamps
 * each change (`changed_at`, `added_at`: identity/manager.go), which the recommended body names;
 * a body without it is told apart by when it arrived (src/hooks/kratos.ts).
 */
describe('Kratos account-change notices, one per change', () => {
  const KEY = 'kratos-courier-key-for-notice-tests-0123456789'
  // A minute's start ahead of the database's clock: each test moves its own time from there.
  let now = new Date((Math.floor(Date.now() / 60_000) + 1) * 60_000)
  const f = useWebStack({ worker: false, clock: () => now, webhooks: { KRATOS_COURIER_API_KEY: KEY } })
  const post = async (body: unknown) =>
    expect((await f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${KEY}` })).status).to.equal(200)
  const noticesTo = async (address: string) =>
    (await f.db.owner('outbox.security_outbox_messages').where({ destination: address, purpose: 'security_notice' })).length
  const later = (seconds: number) => (now = new Date(now.getTime() + seconds * 1000))
  beforeEach(() => later(24 * 3_600))

  it('with the recommended body, one notice per change time: a retry seconds or hours later sends nothing, a change stamped later does', async () => {
    for (const [key, field] of [
      ['email/authenticator_key_added', 'added_at'],
      ['email/verifiable_address_changed', 'changed_at'],
    ] as const) {
      const address = uniqueEmail('kratos-stamped')
      const change = to(RECOMMENDED[key]!, address)
      await post(change)
      later(2)
      await post(change)
      later(3 * 3_600)
      await post(change)
      expect(await noticesTo(address), `${key}: Kratos' retries of one change`).to.equal(1)
      await post({ ...change, [field]: '2026-12-06T13:40:17Z' })
      expect(await noticesTo(address), `${key}: another change`).to.equal(2)
    }
  })

  it('without a time in the body, a retry within the minute sends nothing, and a change minutes later is sent', async () => {
    for (const key of ['sms/authenticator_key_added', 'sms/verifiable_address_changed'] as const) {
      const phone = uniquePhone()
      now = new Date((Math.floor(now.getTime() / 60_000) + 1) * 60_000 + 5_000)
      await post(to(DEFAULT[key]!, phone))
      later(2)
      await post(to(DEFAULT[key]!, phone))
      expect(await noticesTo(phone), `${key}: Kratos' retry`).to.equal(1)
      later(5 * 60)
      await post(to(DEFAULT[key]!, phone))
      expect(await noticesTo(phone), `${key}: another change`).to.equal(2)
    }
  })

  it('an unknown-address notice, which a stranger can make Kratos send, reaches an address once a day', async () => {
    const address = uniqueEmail('kratos-unknown-daily')
    await post(to(RECOMMENDED['email/recovery_code_invalid']!, address))
    later(5 * 3_600)
    await post(to(RECOMMENDED['email/recovery_code_invalid']!, address))
    expect(await noticesTo(address)).to.equal(1)
  })
})
