import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { expect } from 'chai'
import { loadConfig } from '../src/providers/config.ts'
import { HOOK_CALLERS } from '../src/hooks/hook-delivery.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { createElevatedSession, createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'
import { Webhook } from 'standardwebhooks'

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./fixtures/hooks/${name}`, import.meta.url), 'utf8'))
const EMAIL = fixture('supabase-send-email.json')
const RECOVERY_CODE = fixture('kratos-courier-recovery-code.json')
const KRATOS_KEY = 'kratos-courier-key-for-attack-tests-0123456789'
const SUPABASE_KEY = randomBytes(32)
// A hosted project's auth URL, as the Supabase payload names it in `site_url`.
const SITE = 'https://project-ref.supabase.co'

/**
 * Attacks on the identity systems' hooks (docs/hooks.md): what a stranger can make the upstream
 * send, or send to our hook routes themselves, must not stop the owner's own code, and what the
 * hook sends must stay what the deployment configured.
 */
describe('attacks on the hooks', () => {
  let now = new Date()
  const f = useWebStack({
    worker: false,
    clock: () => now,
    clientLimitPerMinute: 5,
    webhooks: {
      SUPABASE_HOOK_SECRET: `v1,whsec_${SUPABASE_KEY.toString('base64')}`,
      KRATOS_COURIER_API_KEY: KRATOS_KEY,
      SUPABASE_LINK_ORIGINS: [SITE],
      KRATOS_LINK_ORIGINS: ['https://auth.example.org'],
    },
  })
  beforeEach(() => {
    // Each test in a minute and an hour of its own: no budget carries over.
    now = new Date(now.getTime() + 2 * 3_600_000)
  })

  const supabase = (body: unknown, signWith = SUPABASE_KEY) => {
    const text = JSON.stringify(body)
    const id = randomUUID()
    const timestamp = String(Math.floor(now.getTime() / 1000))
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': timestamp,
      'webhook-signature': new Webhook(signWith, { format: 'raw' }).sign(id, now, text),
    }
    return f.stack.call('POST', '/hooks/supabase/send-email', text, headers)
  }
  const supabaseEmail = (action: string, to: string, site = SITE) => ({
    user: { ...EMAIL.user, email: to },
    email_data: {
      ...EMAIL.email_data,
      email_action_type: action,
      site_url: `${site}/auth/v1`,
      redirect_to: 'https://app.example.org/welcome',
      token_hash: randomBytes(28).toString('hex'),
    },
  })
  const kratos = (body: unknown, key = KRATOS_KEY) =>
    f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${key}` })
  const kratosRecovery = (to: string, code: string) => ({ ...RECOVERY_CODE, recipient: to, to, recovery_code: code })

  it("twenty Kratos recovery requests for alice, a stranger's, do not stop alice's own code through the hook", async () => {
    const alice = `alice.${randomBytes(3).toString('hex')}@corp.example`
    for (let i = 0; i < 20; i++) expect((await kratos(kratosRecovery(alice, String(10_000_000 + i)))).status).to.equal(200)
    const own = await kratos(kratosRecovery(alice, '87654321'))
    expect([own.status, own.body?.code], "alice's own code is accepted").to.deep.equal([200, undefined])
  })

  it("Supabase sign-ups for alice+1…alice+20 at alice's domain do not stop alice's own code: the budget counts the exact address", async () => {
    const local = `alice.${randomBytes(3).toString('hex')}`
    for (let i = 1; i <= 20; i++)
      expect((await supabase(supabaseEmail('signup', `${local}+${i}@corp.example`))).status, `variant ${i}`).to.equal(200)
    const own = await supabase(supabaseEmail('recovery', `${local}@corp.example`))
    expect([own.status, own.body?.code], "alice's own recovery link is accepted").to.deep.equal([200, undefined])
  })

  it('a hook delivers links only to the origins its settings name: a look-alike site_url or recovery_url is refused, nothing written', async () => {
    const to = `bob.${randomBytes(3).toString('hex')}@corp.example`
    for (const site of ['https://project-ref.supabase.co.evil.example', 'https://project-ref.supabаse.co', 'https://evil.example']) {
      // Supabase reads a refusal only from a 200 answer (docs/hooks.md): its user sees the 422.
      const answer = await supabase(supabaseEmail('magiclink', to, site))
      expect(
        [answer.status, answer.body?.code, (answer.body as { error?: { http_code?: number } } | undefined)?.error?.http_code],
        site,
      ).to.deep.equal([200, 'link_origin_not_allowed', 422])
    }
    const phished = { ...RECOVERY_CODE, template_type: 'recovery_valid', recovery_code: null, recipient: to, to }
    const answer = await kratos({ ...phished, recovery_url: 'https://auth.example.org.evil.example/recovery?token=abc' })
    expect([answer.status, answer.body?.code]).to.deep.equal([422, 'link_origin_not_allowed'])
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: to })).to.have.length(0)
    expect((await kratos({ ...phished, recovery_url: 'https://auth.example.org/recovery?token=abc' })).status).to.equal(200)
  })

  it("the hooks' callers are not API keys in the console: not listed, and neither revoked nor rotated into a real key", async () => {
    const email = uniqueEmail('staff')
    const { identityId } = await createVerifiedIdentity(f.db.owner, email)
    await changeStaff(f.db.owner, 'grant', parseIdentifier(email)!, 'test', now)
    const staff = { headers: await createElevatedSession(f.db.owner, identityId, now) }
    const listed = await f.stack.call('GET', '/platform-admin/api-keys', undefined, staff.headers)
    expect(listed.status).to.equal(200)
    const ids = (listed.body!.items as { id: string }[]).map((item) => item.id)
    for (const caller of Object.values(HOOK_CALLERS)) {
      expect(ids, 'not listed').not.to.include(caller.apiKeyId)
      const rotated = await f.stack.call('POST', `/platform-admin/api-keys/${caller.apiKeyId}/rotation`, undefined, staff.headers)
      expect([rotated.status, rotated.body?.code], 'no key minted from a hook caller').to.deep.equal([404, 'api_key_not_found'])
      const revoked = await f.stack.call('DELETE', `/platform-admin/api-keys/${caller.apiKeyId}`, undefined, staff.headers)
      expect([revoked.status, revoked.body?.code]).to.deep.equal([404, 'api_key_not_found'])
    }
    expect((await kratos(kratosRecovery(`carol.${randomBytes(3).toString('hex')}@corp.example`, '11223344'))).status).to.equal(200)
  })

  it("failed authentications on the hook routes are counted per client: past the client's limit they are answered 429, and a real delivery still goes", async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await supabase(supabaseEmail('magiclink', 'x@corp.example'), randomBytes(32))).status)
    for (let i = 0; i < 3; i++) statuses.push((await kratos(kratosRecovery('x@corp.example', '12345678'), `${KRATOS_KEY}x`)).status)
    expect(statuses, 'five failures a minute, then 429').to.deep.equal([401, 401, 401, 401, 401, 429, 429])
    const refused = await kratos(kratosRecovery('x@corp.example', '12345678'), 'wrong')
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60)
    const own = await kratos(kratosRecovery(`dave.${randomBytes(3).toString('hex')}@corp.example`, '55667788'))
    expect(own.status, 'the real caller from the same network is not refused').to.equal(200)
  })

  it('SUPABASE_HOOK_SECRET refuses a key shorter than 24 random bytes', () => {
    const load = (bytes: number) => () =>
      loadConfig({ NODE_ENV: 'test', SUPABASE_HOOK_SECRET: `v1,whsec_${randomBytes(bytes).toString('base64')}` }, 'web')
    expect(load(3)).to.throw(/SUPABASE_HOOK_SECRET/)
    expect(load(23)).to.throw(/SUPABASE_HOOK_SECRET/)
    expect(load(24)).not.to.throw()
  })
})
