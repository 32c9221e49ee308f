import { expect } from 'chai'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Webhook } from 'standardwebhooks'
import { readSupabaseEmailHook, readSupabaseSmsHook } from '../src/hooks/supabase.ts'
import { columnsContaining, eventually, inbox, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { rowCounts } from './support/row-counts.ts'
import { useWebStack } from './support/web-stack.ts'

// Bodies as supabase/auth bc32168 builds them (test/fixtures/hooks/README.md), one per action type.
const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const EMAILS: Record<string, { user: Record<string, unknown>; email_data: Record<string, string> }> =
  fixture('supabase-auth-send-email.json')
const SMS: Record<string, { user: Record<string, unknown>; sms: Record<string, string> }> = fixture('supabase-auth-send-sms.json')
const SITE = 'https://abcdefghijklmnopqrst.supabase.co/auth/v1'

/** A fixture with its recipient (and any email_data field) replaced: everything else as Supabase sent it. */
function email(action: string, to?: string, data: Record<string, string> = {}, user: Record<string, unknown> = {}) {
  const body = structuredClone(EMAILS[action]!)
  return { ...body, user: { ...body.user, ...(to ? { email: to } : {}), ...user }, email_data: { ...body.email_data, ...data } }
}
const messagesOf = (reading: ReturnType<typeof readSupabaseEmailHook>) => {
  if (!('messages' in reading)) throw new Error(`refused: ${reading.refusal}`)
  return reading.messages.map(({ purpose, channel, destination, secret }) => ({ purpose, channel, destination, secret }))
}
const verifyLink = (base: string, type: string, tokenHash: string, redirect = 'https://app.example.com/welcome') =>
  `${base}?token=${tokenHash}&type=${type}&redirect_to=${encodeURIComponent(redirect)}`

describe('Supabase Auth hook bodies as supabase/auth sends them', () => {
  it('reads every action type Supabase sends to the Send Email Hook into at least one message', () => {
    for (const action of Object.keys(EMAILS)) expect(messagesOf(readSupabaseEmailHook(EMAILS[action])), action).to.have.length.within(1, 2)
  })

  it('sends the code beside the link by default, and only the link or only the code when configured (item 5)', () => {
    const { token, token_hash: hash } = EMAILS.signup!.email_data
    const link = verifyLink(`${SITE}/verify`, 'signup', hash!)
    expect(messagesOf(readSupabaseEmailHook(EMAILS.signup))).to.deep.equal([
      { purpose: 'magic_link', channel: 'email', destination: 'alice@example.com', secret: { link, code: token } },
    ])
    expect(messagesOf(readSupabaseEmailHook(EMAILS.signup, { content: 'link' }))[0]?.secret).to.deep.equal({ link })
    expect(messagesOf(readSupabaseEmailHook(EMAILS.signup, { content: 'code' }))[0]).to.deep.include({
      purpose: 'verification_code',
      secret: { code: token },
    })
  })

  it('sends each half of a secure email change its own code and link, to the address it belongs to', () => {
    const { email_data: data } = EMAILS['email_change.secure']!
    expect(messagesOf(readSupabaseEmailHook(EMAILS['email_change.secure']))).to.deep.equal([
      {
        purpose: 'magic_link',
        channel: 'email',
        destination: 'alice@example.com',
        secret: { link: verifyLink(`${SITE}/verify`, 'email_change', data.token_hash_new!), code: data.token },
      },
      {
        purpose: 'magic_link',
        channel: 'email',
        destination: 'alice.new@example.com',
        secret: { link: verifyLink(`${SITE}/verify`, 'email_change', data.token_hash!), code: data.token_new },
      },
    ])
  })

  it('carries a native app’s custom-scheme redirect_to in the link, which stays https (item 2)', () => {
    const redirect = 'com.example.app://login-callback'
    const [message] = messagesOf(readSupabaseEmailHook(email('magiclink', undefined, { redirect_to: redirect })))
    const link = new URL((message!.secret as { link: string }).link)
    expect(link.protocol).to.equal('https:')
    expect(link.searchParams.get('redirect_to')).to.equal(redirect)
    for (const hostile of ['javascript:alert(1)', 'not a uri', 'https://app.example.com/\u0000x'])
      expect(readSupabaseEmailHook(email('magiclink', undefined, { redirect_to: hostile })), hostile).to.deep.equal({
        refusal: 'malformed',
      })
  })

  it('builds the verify link on the path Supabase’s mailer uses, resolved as Supabase resolves it (item 3)', () => {
    const hash = EMAILS.recovery!.email_data.token_hash!
    // Self-hosted docker: API_EXTERNAL_URL is the gateway's origin, MAILER_URLPATHS_* "/auth/v1/verify".
    const docker = email('recovery', undefined, { site_url: 'https://supabase.example.org' })
    expect(messagesOf(readSupabaseEmailHook(docker, { verifyPath: '/auth/v1/verify', content: 'link' }))[0]?.secret).to.deep.equal({
      link: verifyLink('https://supabase.example.org/auth/v1/verify', 'recovery', hash),
    })
    // `supabase start` (api.tls on): MAILER_URLPATHS_* is the whole URL, which resolves to itself.
    const cli = email('recovery', undefined, { site_url: 'https://127.0.0.1:54321/auth/v1' })
    expect(
      messagesOf(readSupabaseEmailHook(cli, { verifyPath: 'https://127.0.0.1:54321/auth/v1/verify', content: 'link' }))[0]?.secret,
    ).to.deep.equal({ link: verifyLink('https://127.0.0.1:54321/auth/v1/verify', 'recovery', hash) })
    // Unset: `<site_url>/verify`, right for hosted projects, the CLI and bare GoTrue.
    expect(messagesOf(readSupabaseEmailHook(EMAILS.recovery, { content: 'link' }))[0]?.secret).to.deep.equal({
      link: verifyLink(`${SITE}/verify`, 'recovery', hash),
    })
  })

  it('reads every *_notification as a security notice with no secret, to the address Supabase’s own mailer uses (item 6)', () => {
    const notice = (action: string) => messagesOf(readSupabaseEmailHook(EMAILS[action]))
    expect(notice('password_changed_notification')).to.deep.equal([
      {
        purpose: 'security_notice',
        channel: 'email',
        destination: 'alice@example.com',
        secret: { notice: { event: 'password_changed', identifier: '' } },
      },
    ])
    // Supabase tells the old address that the address changed, naming the new one masked.
    const [changed] = notice('email_changed_notification')
    expect(changed).to.deep.include({ destination: 'alice@example.com' })
    expect(changed?.secret).to.have.nested.property('notice.event', 'email_changed')
    expect(JSON.stringify(changed?.secret)).not.to.include('alice.new@')
    for (const [action, event, identifier] of [
      ['identity_linked_notification', 'identity_linked', 'github'],
      ['identity_unlinked_notification', 'identity_unlinked', 'github'],
      ['mfa_factor_enrolled_notification', 'mfa_factor_enrolled', 'totp'],
      ['mfa_factor_unenrolled_notification', 'mfa_factor_unenrolled', 'phone'],
    ])
      expect(notice(action!)[0]?.secret, action).to.deep.equal({ notice: { event, identifier } })
    expect(notice('phone_changed_notification')[0]?.secret).to.have.nested.property('notice.event', 'phone_changed')
  })

  it('reads the SMS hook’s phone OTP and MFA challenge as codes on the phone channel', () => {
    const read = (body: unknown) => {
      const reading = readSupabaseSmsHook(body)
      if (!('messages' in reading)) throw new Error(reading.refusal)
      return reading.messages.map(({ purpose, destination, secret }) => ({ purpose, destination, secret }))
    }
    expect(read(SMS.otp)).to.deep.equal([{ purpose: 'verification_code', destination: '+15555550100', secret: { code: '561166' } }])
    expect(read(SMS.mfa)).to.deep.equal([{ purpose: 'step_up', destination: '+15555550177', secret: { code: '904127' } }])
  })
})

describe('Supabase Auth hooks end to end, signed with the standardwebhooks library', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`
  const f = useWebStack({
    webhooks: { SUPABASE_HOOK_SECRET: `v1,${secret}`, SUPABASE_LINK_ORIGINS: [new URL(SITE).origin], HOOK_DESTINATION_HOURLY_BUDGET: 20 },
  })

  /** A delivery as supabase/auth's hookshttp.go sends it: the body signed by standard-webhooks' own Webhook.sign. */
  function signed(body: unknown) {
    const text = typeof body === 'string' ? body : JSON.stringify(body)
    const id = randomUUID()
    const at = new Date()
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, text),
    }
    return { text, headers }
  }
  const post = (path: string, body: unknown) => {
    const delivery = signed(body)
    return f.stack.call('POST', path, delivery.text, delivery.headers)
  }
  const emailsTo = (to: string) =>
    eventually(async () => {
      const emails = await inbox(f.stack.emulator.url, to)
      return emails.length > 0 ? emails : undefined
    }, `an email to ${to}`)

  it('delivers a signup with both the code and the link Supabase’s mailer would send (item 5)', async () => {
    const to = uniqueEmail('supabase-both')
    const body = email('signup', to)
    const answer = await post('/hooks/supabase/send-email', body)
    expect([answer.status, answer.body]).to.deep.equal([200, {}])
    const [sent] = await emailsTo(to)
    expect(sent?.body.text).to.include(verifyLink(`${SITE}/verify`, 'signup', body.email_data.token_hash!))
    expect(sent?.body.text).to.include(body.email_data.token)
  })

  it('delivers a magic link whose redirect_to is a native app’s custom scheme (item 2)', async () => {
    const to = uniqueEmail('supabase-native')
    const answer = await post('/hooks/supabase/send-email', email('magiclink', to, { redirect_to: 'com.example.app://login-callback' }))
    expect(answer.status).to.equal(200)
    const [sent] = await emailsTo(to)
    expect(sent?.body.text).to.include(`redirect_to=${encodeURIComponent('com.example.app://login-callback')}`)
  })

  it('delivers a password-changed notification as a security notice with no link or code (item 6)', async () => {
    const to = uniqueEmail('supabase-notice')
    expect((await post('/hooks/supabase/send-email', email('password_changed_notification', to))).status).to.equal(200)
    const [sent] = await emailsTo(to)
    expect(sent?.subject).to.match(/security notice/i)
    expect(sent?.body.text).to.match(/password .* was changed/i)
    expect(sent?.body.text).not.to.match(/https?:\/\//)
    const [row] = await f.db.owner('outbox.security_outbox_messages').where({ destination: to }).select('purpose')
    expect(row).to.deep.equal({ purpose: 'security_notice' })
  })

  it('answers a deliberate refusal with 200 and the error Supabase reads, writing nothing (item 4)', async () => {
    // A premium-rate number: refused by the courier's rule, which Supabase must show its user as a 422, not a 500.
    const before = await rowCounts(f.db.owner)
    const delivery = signed({ ...SMS.otp, sms: { ...SMS.otp!.sms, phone: '449098790000' } })
    const answer = await f.stack.call('POST', '/hooks/supabase/send-sms', delivery.text, delivery.headers)
    expect(answer.status).to.equal(200)
    // hookshttp.go reads a 200 only as `application/json` (parameters allowed), then `{error: {http_code, message}}`.
    expect(answer.headers.get('content-type')).to.match(/^application\/json(;|$)/)
    expect(answer.body).to.deep.include({ error: { http_code: 422, message: 'This number cannot receive codes on this channel.' } })
    expect(await rowCounts(f.db.owner)).to.deep.equal(before)
  })

  it('answers an exhausted per-address budget with 200 and http_code 429, so the app sees Supabase’s 429 (item 4)', async () => {
    const to = uniqueEmail('supabase-budget')
    let answer: Awaited<ReturnType<typeof post>> | undefined
    for (let sent = 0; sent < 200; sent += 1) {
      answer = await post(
        '/hooks/supabase/send-email',
        email('magiclink', to, { token: String(100000 + sent), token_hash: randomBytes(28).toString('hex') }),
      )
      if (answer.body?.error) break
    }
    expect(answer?.status).to.equal(200)
    expect(answer?.body).to.have.nested.property('error.http_code', 429)
  })

  it('accepts a Supabase body near its 1 MB request limit (a user with large metadata) and refuses one over it (item 8)', async () => {
    const to = uniqueEmail('supabase-large')
    const padding = 'x'.repeat(900 * 1024)
    const answer = await post('/hooks/supabase/send-email', email('magiclink', to, {}, { user_metadata: { avatar: padding } }))
    expect(answer.status).to.equal(200)
    await emailsTo(to)
    const over = await post(
      '/hooks/supabase/send-email',
      email('magiclink', uniqueEmail('over'), {}, { user_metadata: { avatar: 'x'.repeat(1100 * 1024) } }),
    )
    expect(over.status).to.equal(413)
  })

  it('gives an SMS code Supabase’s own 60 s lifetime, not an hour (item 8)', async () => {
    const phone = uniquePhone()
    expect((await post('/hooks/supabase/send-sms', { ...SMS.otp, sms: { ...SMS.otp!.sms, phone: phone.slice(1) } })).status).to.equal(200)
    const [row] = await f.db.owner('outbox.security_outbox_messages').where({ destination: phone }).select('created_at', 'expires_at')
    expect((row.expires_at.getTime() - row.created_at.getTime()) / 1000).to.be.within(59, 61)
  })

  it('leaves the code, the token hash and the link out of every table, log line and answer', async () => {
    const to = uniqueEmail('supabase-secret')
    const body = email('signup', to, { token: '917364', token_hash: randomBytes(28).toString('hex') })
    const answer = await post('/hooks/supabase/send-email', body)
    await emailsTo(to)
    for (const value of [body.email_data.token_hash!, '917364']) {
      expect(await columnsContaining(f.db.owner, value), value).to.deep.equal([])
      expect(f.logs.text(), value).not.to.include(value)
      expect(JSON.stringify(answer.body)).not.to.include(value)
    }
  })
})

describe('Supabase Auth hooks on a self-hosted docker deployment (SUPABASE_VERIFY_PATH)', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`
  const f = useWebStack({
    webhooks: {
      SUPABASE_HOOK_SECRET: `v1,${secret}`,
      SUPABASE_VERIFY_PATH: '/auth/v1/verify',
      SUPABASE_LINK_ORIGINS: ['https://supabase.example.org'],
    },
  })

  it('links to <API_EXTERNAL_URL>/auth/v1/verify, where docker’s gateway serves verify (item 3)', async () => {
    const to = uniqueEmail('supabase-docker')
    const body = email('recovery', to, { site_url: 'https://supabase.example.org' })
    const text = JSON.stringify(body)
    const id = randomUUID()
    const at = new Date()
    const answer = await f.stack.call('POST', '/hooks/supabase/send-email', text, {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, text),
    })
    expect(answer.status).to.equal(200)
    const [sent] = await eventually(async () => {
      const emails = await inbox(f.stack.emulator.url, to)
      return emails.length > 0 ? emails : undefined
    }, 'the recovery email')
    expect(sent?.body.text).to.include(verifyLink('https://supabase.example.org/auth/v1/verify', 'recovery', body.email_data.token_hash!))
  })
})
