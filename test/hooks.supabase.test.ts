import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { randomBytes, randomUUID } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { readSupabaseEmailHook, readSupabaseSmsHook } from '../src/hooks/supabase.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { columnsContaining, eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { rowCounts } from './support/row-counts.ts'
import { useWebStack } from './support/web-stack.ts'

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const EMAIL = fixture('supabase-send-email.json')
const SMS = fixture('supabase-send-sms.json')

/** The documented Send Email payload with another action type (and the fields that type sets). */
function emailHook(action: string, emailData: Record<string, string> = {}, user: Record<string, string> = {}) {
  return { user: { ...EMAIL.user, ...user }, email_data: { ...EMAIL.email_data, email_action_type: action, ...emailData } }
}
const verifyLink = (type: string, tokenHash: string) =>
  `http://localhost:9999/verify?token=${tokenHash}&type=${type}&redirect_to=${encodeURIComponent('http://localhost:3000/')}`

describe('reading Supabase Send Email and Send SMS hooks', () => {
  const hash = EMAIL.email_data.token_hash

  it('reads the documented signup payload as the link Supabase itself would send, with its code beside it', () => {
    const reading = readSupabaseEmailHook(EMAIL)
    expect(reading).to.have.property('messages').with.length(1)
    const [message] = 'messages' in reading ? reading.messages : []
    expect(message).to.deep.include({
      purpose: 'magic_link',
      channel: 'email',
      destination: 'valid.email@supabase.io',
      secret: { link: verifyLink('signup', hash), code: '305805' },
    })
  })

  for (const action of ['recovery', 'magiclink', 'invite']) {
    it(`reads ${action} as a link of type ${action}`, () => {
      const reading = readSupabaseEmailHook(emailHook(action))
      expect('messages' in reading && reading.messages.map((m) => [m.purpose, m.destination, m.secret])).to.deep.equal([
        ['magic_link', 'valid.email@supabase.io', { link: verifyLink(action, hash), code: '305805' }],
      ])
    })
  }

  for (const [action, purpose] of [
    ['reauthentication', 'step_up'],
    ['email', 'verification_code'],
  ] as const) {
    it(`reads ${action} as a ${purpose} code without a link`, () => {
      const reading = readSupabaseEmailHook(emailHook(action, { token_hash: '' }))
      expect('messages' in reading && reading.messages.map((m) => [m.purpose, m.secret])).to.deep.equal([[purpose, { code: '305805' }]])
    })
  }

  it('sends a secure email change as two links: token_hash_new to the current address, token_hash to the new one', () => {
    const change = emailHook(
      'email_change',
      { token: '111111', token_hash_new: 'a'.repeat(56), token_new: '222222', token_hash: 'b'.repeat(56) },
      { new_email: 'new.email@supabase.io' },
    )
    const reading = readSupabaseEmailHook(change)
    expect('messages' in reading && reading.messages.map((m) => [m.purpose, m.destination, m.secret])).to.deep.equal([
      ['magic_link', 'valid.email@supabase.io', { link: verifyLink('email_change', 'a'.repeat(56)), code: '111111' }],
      ['magic_link', 'new.email@supabase.io', { link: verifyLink('email_change', 'b'.repeat(56)), code: '222222' }],
    ])
  })

  it('sends an email change without Secure Email Change as one message to the new address', () => {
    const change = emailHook('email_change', { token: '333333', token_hash: 'c'.repeat(56) }, { new_email: 'new.email@supabase.io' })
    const reading = readSupabaseEmailHook(change)
    expect('messages' in reading && reading.messages.map((m) => [m.destination, m.secret])).to.deep.equal([
      ['new.email@supabase.io', { link: verifyLink('email_change', 'c'.repeat(56)), code: '333333' }],
    ])
  })

  it('refuses action types it does not know (a notification it does not know too)', () => {
    for (const action of ['some_future_action', 'some_future_notification', 'constructor', 'toString'])
      expect(readSupabaseEmailHook(emailHook(action)), action).to.deep.equal({ refusal: 'unsupported_kind' })
  })

  it('refuses a payload without an address, a secret, a site URL, or with a code that is not one', () => {
    for (const payload of [
      emailHook('signup', {}, { email: '' }),
      emailHook('signup', { token_hash: '' }),
      emailHook('reauthentication', { token: '' }),
      emailHook('email_change', { token_hash_new: '' }),
      emailHook('signup', { site_url: 'javascript:alert(1)' }),
      emailHook('signup', { token: '12345<' }),
      { user: EMAIL.user },
      'signup',
      null,
    ])
      expect(readSupabaseEmailHook(payload), JSON.stringify(payload)?.slice(0, 80)).to.deep.equal({ refusal: 'malformed' })
  })

  it('names a message the same way whenever Supabase retries it, and differently for another code', () => {
    const sameness = (payload: unknown) => {
      const reading = readSupabaseEmailHook(payload)
      return 'messages' in reading ? reading.messages[0]?.sameness : reading.refusal
    }
    expect(sameness(EMAIL)).to.equal(sameness(structuredClone(EMAIL)))
    expect(sameness(EMAIL)).not.to.equal(sameness(emailHook('signup', { token_hash: hash.replace('7', '8') })))
    expect(sameness(EMAIL)).not.to.equal(sameness(emailHook('recovery')))
  })

  it('reads the documented SMS payload as a verification code to the user’s phone, and an MFA challenge as a step-up', () => {
    expect(readSupabaseSmsHook(SMS)).to.deep.include({
      messages: [
        {
          purpose: 'verification_code',
          channel: 'phone',
          destination: '+1333363128',
          secret: { code: '561166' },
          sameness: JSON.stringify(['supabase-sms', 'verification_code', '+1333363128', '561166']),
        },
      ],
    })
    const mfa = readSupabaseSmsHook({ ...SMS, sms: { otp: '123456', sms_type: 'mfa', phone: '4915112345678' } })
    expect('messages' in mfa && mfa.messages.map((m) => [m.purpose, m.destination])).to.deep.equal([['step_up', '+4915112345678']])
  })

  it('reads the phone as the identity flows do (libphonenumber): +0… and other unreadable numbers are refused, a spelled one is its E.164', () => {
    const destination = (phone: string) => {
      const reading = readSupabaseSmsHook({ ...SMS, sms: { ...SMS.sms, phone } })
      return 'messages' in reading ? reading.messages[0]!.destination : reading.refusal
    }
    // The regex the adapter had took `+` and 8–15 digits (+0… passed, 12 did not): now one reading, one refusal.
    for (const phone of ['01234567890', '+0447911123456', '999123456789', '12']) {
      expect(parseIdentifier(phone.startsWith('+') ? phone : `+${phone}`), phone).to.equal(undefined)
      expect(destination(phone), phone).to.equal('invalid_destination')
    }
    expect(destination('44 7911 123456')).to.equal('+447911123456')
    expect(destination('+4915112345678')).to.equal('+4915112345678')
  })

  it('refuses an SMS payload without a phone number or an OTP', () => {
    expect(readSupabaseSmsHook({ ...SMS, user: { ...SMS.user, phone: '' } })).to.deep.equal({ refusal: 'malformed' })
    expect(readSupabaseSmsHook({ ...SMS, sms: {} })).to.deep.equal({ refusal: 'malformed' })
    expect(readSupabaseSmsHook({ ...SMS, sms: { otp: '1234' } })).to.deep.equal({ refusal: 'malformed' })
  })
})

describe('Supabase hooks end to end (POST /hooks/supabase/send-email, /send-sms)', () => {
  const key = randomBytes(32)
  const f = useWebStack({
    webhooks: { SUPABASE_HOOK_SECRET: `v1,whsec_${key.toString('base64')}`, SUPABASE_LINK_ORIGINS: ['https://project-ref.supabase.co'] },
  })
  // The courier sends https links only: the documented payload's local site URL as a hosted project's.
  const SITE = 'https://project-ref.supabase.co/auth/v1'
  const REDIRECT = 'https://app.example.org/welcome'

  function payload(action: string, to: string, emailData: Record<string, string> = {}, user: Record<string, string> = {}) {
    return emailHook(
      action,
      { site_url: SITE, redirect_to: REDIRECT, token_hash: randomBytes(28).toString('hex'), ...emailData },
      { email: to, ...user },
    )
  }
  /** A delivery signed as Supabase signs it (supabase/auth hookshttp.go), at `at`, under `signWith`. */
  function signed(body: unknown, options: { at?: Date; id?: string; signWith?: Buffer } = {}) {
    const text = typeof body === 'string' ? body : JSON.stringify(body)
    const id = options.id ?? randomUUID()
    const at = options.at ?? new Date()
    const signature = new Webhook(options.signWith ?? key, { format: 'raw' }).sign(id, at, text)
    const timestamp = String(Math.floor(at.getTime() / 1000))
    return { text, headers: { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature } }
  }
  const post = (path: string, delivery: { text: string; headers: Record<string, string> }) =>
    f.stack.call('POST', path, delivery.text, delivery.headers)
  const emailsTo = (to: string, count = 1) =>
    eventually(async () => {
      const emails = await inbox(f.stack.emulator.url, to)
      return emails.length >= count ? emails : undefined
    }, `${count} email(s) to ${to}`)

  for (const action of ['signup', 'recovery', 'magiclink', 'invite']) {
    it(`delivers ${action} through the worker as the link Supabase would send, with its code`, async () => {
      const to = uniqueEmail(action)
      const body = payload(action, to)
      const answer = await post('/hooks/supabase/send-email', signed(body))
      expect(answer.status).to.equal(200)
      expect(answer.body).to.deep.equal({})
      const [email] = await emailsTo(to)
      const link = `${SITE}/verify?token=${body.email_data.token_hash}&type=${action}&redirect_to=${encodeURIComponent(REDIRECT)}`
      expect(email?.body.text).to.include(link)
      expect(email?.body.text).to.include(body.email_data.token)
    })
  }

  for (const action of ['reauthentication', 'email']) {
    it(`delivers ${action} through the worker as its code`, async () => {
      const to = uniqueEmail(action)
      const answer = await post('/hooks/supabase/send-email', signed(payload(action, to, { token: '482913' })))
      expect(answer.status).to.equal(200)
      const [email] = await emailsTo(to)
      expect(email?.body.text).to.include('482913')
    })
  }

  it('delivers a secure email change to both addresses, each with its own link', async () => {
    const [current, next] = [uniqueEmail('current'), uniqueEmail('next')]
    const [forCurrent, forNext] = [randomBytes(28).toString('hex'), randomBytes(28).toString('hex')]
    const body = payload(
      'email_change',
      current,
      { token: '111111', token_hash_new: forCurrent, token_new: '222222', token_hash: forNext },
      { new_email: next },
    )
    expect((await post('/hooks/supabase/send-email', signed(body))).status).to.equal(200)
    expect((await emailsTo(current))[0]?.body.text).to.include(`token=${forCurrent}&type=email_change`)
    expect((await emailsTo(next))[0]?.body.text).to.include(`token=${forNext}&type=email_change`)
  })

  it('delivers the documented SMS payload’s OTP to the user’s phone on the fleet’s phone channel', async () => {
    const phone = uniquePhone()
    const answer = await post(
      '/hooks/supabase/send-sms',
      signed({ ...SMS, user: { ...SMS.user, phone: phone.slice(1) }, sms: { otp: '736201' } }),
    )
    expect(answer.status).to.equal(200)
    const sent = await eventually(async () => f.stack.wasender.requests.find((request) => request.to === phone), 'the WhatsApp message')
    expect(sent.text).to.include('736201')
  })

  describe('attacks on the hook', () => {
    const refusedWithNothingWritten = async (
      path: string,
      delivery: { text: string; headers: Record<string, string> },
      status: number,
      code: string,
    ) => {
      const before = await rowCounts(f.db.owner)
      const answer = await post(path, delivery)
      expect(answer.status).to.equal(status)
      expect(answer.body).to.deep.include({ code, error: { http_code: status, message: answer.body?.title } })
      // A refused credential spends the client's per-client limit: that one hit is all it writes.
      const counted = status === 401 ? { 'platform.rate_limit_hits': before['platform.rate_limit_hits']! + 1 } : {}
      expect(await rowCounts(f.db.owner)).to.deep.equal({ ...before, ...counted })
    }
    /** A deliberate refusal: 200 with `{error: {http_code, message}}`, the only refusal Supabase Auth reads from a hook. */
    const refusedAsSupabaseReads = async (
      path: string,
      delivery: { text: string; headers: Record<string, string> },
      httpCode: number,
      code: string,
    ) => {
      const before = await rowCounts(f.db.owner)
      const answer = await post(path, delivery)
      expect(answer.status).to.equal(200)
      expect(answer.body).to.include({ code }).and.to.have.nested.property('error.http_code', httpCode)
      expect(await rowCounts(f.db.owner)).to.deep.equal(before)
    }

    it('an SMS pump through Supabase: a premium-rate or toll-free phone is refused (422 as Supabase reads it), nothing written', async () => {
      for (const phone of ['449098790000', '498001234567'])
        await refusedAsSupabaseReads(
          '/hooks/supabase/send-sms',
          signed({ ...SMS, user: { ...SMS.user, phone }, sms: { otp: '736201' } }),
          422,
          'unsupported_phone_number',
        )
    })

    it('a forged delivery, signed with another secret, is refused 401 with nothing written', async () => {
      const to = uniqueEmail('forged')
      await refusedWithNothingWritten(
        '/hooks/supabase/send-email',
        signed(payload('magiclink', to), { signWith: randomBytes(32) }),
        401,
        'invalid_signature',
      )
      await refusedWithNothingWritten(
        '/hooks/supabase/send-sms',
        signed({ ...SMS, user: { phone: uniquePhone() } }, { signWith: randomBytes(32) }),
        401,
        'invalid_signature',
      )
    })

    it('a captured delivery replayed after the five-minute window is refused 401 with nothing written', async () => {
      const late = new Date(Date.now() - 6 * 60_000)
      await refusedWithNothingWritten(
        '/hooks/supabase/send-email',
        signed(payload('magiclink', uniqueEmail('stale')), { at: late }),
        401,
        'invalid_signature',
      )
    })

    it('a captured delivery with its body swapped for another address is refused 401 with nothing written', async () => {
      const captured = signed(payload('magiclink', uniqueEmail('victim')))
      const swapped = captured.text.replace(/"email":"[^"]+"/, '"email":"attacker@example.org"')
      await refusedWithNothingWritten('/hooks/supabase/send-email', { text: swapped, headers: captured.headers }, 401, 'invalid_signature')
    })

    it('an unsigned delivery is refused 401 with nothing written', async () => {
      const { text } = signed(payload('magiclink', uniqueEmail('unsigned')))
      await refusedWithNothingWritten('/hooks/supabase/send-email', { text, headers: {} }, 401, 'invalid_signature')
    })

    it('a delivery replayed within the window, and Supabase’s retry under a new webhook-id, send one message', async () => {
      const to = uniqueEmail('replayed')
      const body = payload('magiclink', to)
      const first = signed(body)
      for (const delivery of [first, first, signed(body)]) expect((await post('/hooks/supabase/send-email', delivery)).status).to.equal(200)
      await emailsTo(to)
      expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: to })).to.have.length(1)
    })

    it('a payload that is not Supabase’s is 400, an action type it does not know 422 as Supabase reads it, both with nothing written', async () => {
      await refusedWithNothingWritten(
        '/hooks/supabase/send-email',
        signed({ user: {}, email_data: { email_action_type: 'signup' } }),
        400,
        'malformed',
      )
      await refusedWithNothingWritten('/hooks/supabase/send-email', signed('not json'), 400, 'malformed')
      await refusedAsSupabaseReads(
        '/hooks/supabase/send-email',
        signed(payload('some_future_action', uniqueEmail('n'))),
        422,
        'unsupported_kind',
      )
    })

    it('leaves the OTP, the token hash and the link out of every table, log line and answer', async () => {
      const to = uniqueEmail('secret')
      const body = payload('signup', to, { token: '904127' })
      const answer = await post('/hooks/supabase/send-email', signed(body))
      await emailsTo(to)
      const phone = uniquePhone()
      await post('/hooks/supabase/send-sms', signed({ ...SMS, user: { ...SMS.user, phone }, sms: { otp: '615283' } }))
      await eventually(async () => f.stack.wasender.requests.find((request) => request.to === phone), 'the WhatsApp message')
      for (const secret of [body.email_data.token_hash, '904127', '615283']) {
        expect(await columnsContaining(f.db.owner, secret), secret).to.deep.equal([])
        expect(f.logs.text(), secret).not.to.include(secret)
        expect(JSON.stringify(answer.body)).not.to.include(secret)
      }
    })
  })

  it('answers 404, as an unknown route does, to every method on the Kratos hook it was not configured with', async () => {
    const headers = { authorization: `Bearer ${'k'.repeat(40)}` }
    const unknown = await f.stack.rawCall('POST', '/hooks/kratos/elsewhere', {}, headers)
    for (const method of ['POST', 'GET', 'OPTIONS']) {
      const answer = await f.stack.rawCall(method, '/hooks/kratos/courier', method === 'POST' ? {} : undefined, headers)
      expect([answer.status, answer.body], method).to.deep.equal([404, unknown.body])
    }
  })
})
