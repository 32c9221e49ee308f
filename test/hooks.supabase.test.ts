import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { readSupabaseEmailHook, readSupabaseSmsHook } from '../src/hooks/supabase.ts'

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

  it('reads the documented signup payload as the link Supabase itself would send', () => {
    const reading = readSupabaseEmailHook(EMAIL)
    expect(reading).to.have.property('messages').with.length(1)
    const [message] = 'messages' in reading ? reading.messages : []
    expect(message).to.deep.include({
      purpose: 'magic_link',
      channel: 'email',
      destination: 'valid.email@supabase.io',
      secret: { link: verifyLink('signup', hash) },
    })
  })

  for (const action of ['recovery', 'magiclink', 'invite']) {
    it(`reads ${action} as a link of type ${action}`, () => {
      const reading = readSupabaseEmailHook(emailHook(action))
      expect('messages' in reading && reading.messages.map((m) => [m.purpose, m.destination, m.secret])).to.deep.equal([
        ['magic_link', 'valid.email@supabase.io', { link: verifyLink(action, hash) }],
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
      ['magic_link', 'valid.email@supabase.io', { link: verifyLink('email_change', 'a'.repeat(56)) }],
      ['magic_link', 'new.email@supabase.io', { link: verifyLink('email_change', 'b'.repeat(56)) }],
    ])
  })

  it('sends an email change without Secure Email Change as one message to the new address', () => {
    const change = emailHook('email_change', { token: '333333', token_hash: 'c'.repeat(56) }, { new_email: 'new.email@supabase.io' })
    const reading = readSupabaseEmailHook(change)
    expect('messages' in reading && reading.messages.map((m) => [m.destination, m.secret])).to.deep.equal([
      ['new.email@supabase.io', { link: verifyLink('email_change', 'c'.repeat(56)) }],
    ])
  })

  it('refuses the security notifications, which carry no secret, and action types it does not know', () => {
    for (const action of [
      'password_changed_notification',
      'identity_linked_notification',
      'mfa_factor_enrolled_notification',
      'constructor',
      'toString',
    ])
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

  it('refuses an SMS payload without a phone number or an OTP', () => {
    expect(readSupabaseSmsHook({ ...SMS, user: { ...SMS.user, phone: '' } })).to.deep.equal({ refusal: 'malformed' })
    expect(readSupabaseSmsHook({ ...SMS, sms: {} })).to.deep.equal({ refusal: 'malformed' })
    expect(readSupabaseSmsHook({ ...SMS, sms: { otp: '1234' } })).to.deep.equal({ refusal: 'malformed' })
  })
})
