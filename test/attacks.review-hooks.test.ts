import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { expect } from 'chai'
import { readSupabaseEmailHook } from '../src/hooks/supabase.ts'
import { uniqueEmail, uniquePhone } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

// What Kratos b86338d posts, with its default body and with docs/hooks.md's recommended one, and
// Supabase's documented Send Email Hook body (test/fixtures/hooks/README.md).
type Body = Record<string, unknown> & { recipient: string; template_type: string }
const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const DEFAULT: Record<string, Body> = fixture('kratos-courier-default-body.json')
const RECOMMENDED: Record<string, Body> = fixture('kratos-courier-recommended-body.json')
const SUPABASE_EMAIL = fixture('supabase-send-email.json')
const KEY = 'kratos-courier-key-for-review-tests-0123456789'

/**
 * Review of the hooks (docs/hooks.md) from outside: the real route with the bodies Kratos and
 * Supabase send. The account-change notices are what tells an owner that somebody else is in
 * their account; a notice the route answers 200 and never sends is a notice the owner never sees.
 */
describe('review: attacks through the hooks', () => {
  let now = new Date()
  const f = useWebStack({ worker: false, clock: () => now, webhooks: { KRATOS_COURIER_API_KEY: KEY } })
  const post = (body: unknown) => f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${KEY}` })
  const to = (body: Body, address: string): Body => ({ ...body, recipient: address, to: address })
  /** The body of a change Kratos stamped `ms` later: the recommended body names the change's time (`changed_at`, `added_at`). */
  const stampedLater = (body: Body, ms: number): Body => {
    const later = (at: unknown) => (typeof at === 'string' ? new Date(Date.parse(at) + ms).toISOString() : at)
    return { ...body, changed_at: later(body.changed_at), added_at: later(body.added_at) }
  }
  const noticesTo = async (address: string) =>
    (await f.db.owner('outbox.security_outbox_messages').where({ destination: address, purpose: 'security_notice' })).length

  for (const [key, body, where] of [
    ['email/authenticator_key_added', RECOMMENDED, 'recommended body'],
    ['email/verifiable_address_changed', RECOMMENDED, 'recommended body'],
    ['sms/authenticator_key_added', DEFAULT, 'default body'],
    ['sms/verifiable_address_changed', DEFAULT, 'default body'],
  ] as const)
    it(`a second ${key} (${where}) the same day is sent too: a thief's change after the owner's own is not hidden from the owner`, async () => {
      const address = key.startsWith('sms/') ? uniquePhone() : uniqueEmail('kratos-notice')
      // The owner adds a key in the morning; the thief, with a stolen session, adds theirs in the afternoon.
      expect((await post(to(body[key]!, address))).status, 'the owner’s change').to.equal(200)
      now = new Date(now.getTime() + 5 * 3_600_000)
      expect((await post(stampedLater(to(body[key]!, address), 5 * 3_600_000))).status, 'the thief’s change').to.equal(200)
      expect(await noticesTo(address), 'two changes, two notices').to.equal(2)
    })

  it('a redirect_to that carries its own token, type and fragment cannot change the link’s token or type', () => {
    const tokenHash = randomBytes(28).toString('hex')
    const reading = readSupabaseEmailHook({
      ...SUPABASE_EMAIL,
      email_data: {
        ...SUPABASE_EMAIL.email_data,
        email_action_type: 'magiclink',
        token_hash: tokenHash,
        site_url: 'https://project-ref.supabase.co/auth/v1',
        redirect_to: 'https://app.example.org/cb?token=attacker&type=signup&redirect_to=https://evil.example#token=attacker',
      },
    })
    if (!('messages' in reading)) throw new Error(`refused: ${reading.refusal}`)
    const link = new URL((reading.messages[0]!.secret as { link: string }).link)
    expect(link.origin + link.pathname).to.equal('https://project-ref.supabase.co/auth/v1/verify')
    expect(link.searchParams.getAll('token')).to.deep.equal([tokenHash])
    expect(link.searchParams.getAll('type')).to.deep.equal(['magiclink'])
    expect(link.hash, 'no fragment of the redirect reaches the verify link').to.equal('')
    for (const redirect of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,x', 'https://app.example.org/\r\nBcc: x'])
      expect(
        readSupabaseEmailHook({ ...SUPABASE_EMAIL, email_data: { ...SUPABASE_EMAIL.email_data, redirect_to: redirect } }),
        JSON.stringify(redirect),
      ).to.deep.equal({ refusal: 'malformed' })
  })
})

/**
 * PHONE_CHANNELS is the deployment's ordered allow-list of phone channels for every path
 * (docs/delivery.md "Phone channels"; docs/hooks.md: a hook's SMS goes "on the first phone channel
 * of PHONE_CHANNELS the fleet has"). A fleet with WhatsApp and SMS, PHONE_CHANNELS unset: WhatsApp first.
 */
describe('review: the hooks and the phone channels', () => {
  const f = useWebStack({ worker: false, sms: true, webhooks: { KRATOS_COURIER_API_KEY: KEY } })
  const post = (body: unknown) => f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${KEY}` })

  it("a hook's phone code goes on the first phone channel of PHONE_CHANNELS the fleet has, as the identity flows' codes do", async () => {
    const phone = uniquePhone()
    expect((await post({ ...RECOMMENDED['sms/login_code_valid']!, recipient: phone, to: phone })).status).to.equal(200)
    const [row] = await f.db.owner('outbox.security_outbox_messages').where({ destination: phone }).select('channel')
    expect(row?.channel, 'WhatsApp, first in PHONE_CHANNELS order').to.equal('whatsapp')
  })
})
