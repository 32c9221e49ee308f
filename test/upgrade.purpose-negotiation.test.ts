import { expect } from 'chai'
import type { Knex } from 'knex'
import { randomBytes, randomUUID } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { createKnex } from '../src/db/knex.ts'
import { PURPOSES, type Purpose } from '../src/outbox/constants.ts'
import { negotiateEnvelopeVersion, readerApplicationName } from '../src/outbox/envelope-negotiation.ts'
import { fleetPurposesGeneration, purposesGenerationOf, renderedByFleet } from '../src/outbox/purpose-negotiation.ts'
import { courierKit } from './support/courier-kit.ts'
import { uniqueEmail } from './support/helpers.ts'
import { rowCounts } from './support/row-counts.ts'
import { useWebStack } from './support/web-stack.ts'

/** How release 0.2.0 (a949653) names its worker's sessions: envelopes announced, no purposes generation. */
const RELEASE_020_SESSIONS = ['sealpost-worker;envelopes=v1,v2', 'sealpost-worker-boss;envelopes=v1,v2']
const THIS_RELEASE_SESSIONS = [readerApplicationName('sealpost-worker'), readerApplicationName('sealpost-worker-boss')]
const KRATOS_KEY = 'kratos-courier-key-for-tests-0123456789'
const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString()

/** Release 0.2.0's own parser of a worker's name (a949653 src/outbox/envelope-negotiation.ts), verbatim. */
function versionsRead020(applicationName: string): readonly string[] {
  const at = applicationName.indexOf(';envelopes=')
  return at < 0 ? ['v1'] : applicationName.slice(at + ';envelopes='.length).split(',')
}

describe('purpose negotiation: which purposes a web accepts', () => {
  const census = (liveWorkers: string[], legacyFleetRegistered = false) => ({ liveWorkers, legacyFleetRegistered })
  const accepted = (liveWorkers: string[], legacy = false) =>
    PURPOSES.filter((purpose: Purpose) => renderedByFleet(purpose, fleetPurposesGeneration(census(liveWorkers, legacy))))
  const IDENTITY_020 = ['sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'invitation', 'security_notice']

  it('a worker of this release announces generation 3 before its envelopes, within 63 bytes, and 0.2.0’s web still reads v1,v2', () => {
    for (const name of THIS_RELEASE_SESSIONS) {
      expect(name).to.match(/;purposes=3;envelopes=v1,v2$/)
      expect(Buffer.byteLength(name)).to.be.at.most(63)
      expect(versionsRead020(name)).to.deep.equal(['v1', 'v2'])
      expect(name.startsWith('sealpost-worker'), 'what 0.2.0’s census selects (LIKE sealpost-worker%)').to.equal(true)
      expect(purposesGenerationOf(name)).to.equal(3)
    }
    // 0.2.0 beside a new worker negotiates exactly as before, and so does this web beside either.
    expect(negotiateEnvelopeVersion(census([...THIS_RELEASE_SESSIONS, ...RELEASE_020_SESSIONS]))).to.equal('v2')
  })

  it('reads 0.2.0’s sessions as generation 2 and 0.1.0’s (nothing announced) as 1', () => {
    expect(RELEASE_020_SESSIONS.map(purposesGenerationOf)).to.deep.equal([2, 2])
    expect(purposesGenerationOf('sealpost-worker-boss')).to.equal(1)
    expect(purposesGenerationOf('sealpost-worker;purposes=4;envelopes=v2,v3'), 'a later release').to.equal(4)
    expect(purposesGenerationOf('sealpost-worker;purposes=x3;envelopes=v1'), 'unreadable: as 0.2.0').to.equal(2)
  })

  const table: [string, string[], boolean, readonly string[]][] = [
    ['only this release’s workers', THIS_RELEASE_SESSIONS, false, PURPOSES],
    ['a later release’s worker beside this one', [...THIS_RELEASE_SESSIONS, 'sealpost-worker;purposes=4;envelopes=v2,v3'], false, PURPOSES],
    ['no worker connected (messages wait for the next)', [], false, PURPOSES],
    ['no worker connected, during the upgrade window from 0.1.0', [], true, PURPOSES],
    ['a live 0.2.0 worker beside new ones', [...THIS_RELEASE_SESSIONS, ...RELEASE_020_SESSIONS], false, IDENTITY_020],
    ['a live 0.1.0 worker, during its upgrade window', [...THIS_RELEASE_SESSIONS, 'sealpost-worker-boss'], true, IDENTITY_020.slice(0, 5)],
    [
      'an unannounced session after the upgrade window (no reader of ours)',
      [...THIS_RELEASE_SESSIONS, 'sealpost-worker-boss'],
      false,
      PURPOSES,
    ],
    // A stolen worker login can announce an old generation: it only makes the web refuse, never accept more.
    [
      'a session announcing generation 1 (a stolen worker login)',
      [...THIS_RELEASE_SESSIONS, 'sealpost-worker;purposes=1;envelopes=v2'],
      false,
      IDENTITY_020.slice(0, 5),
    ],
  ]
  for (const [fleet, names, legacy, purposes] of table)
    it(`accepts ${purposes.length === PURPOSES.length ? 'every purpose' : purposes.join(', ')} for ${fleet}`, () =>
      expect(accepted(names, legacy)).to.deep.equal([...purposes]))
})

describe('purpose negotiation: the courier API and the hooks beside a worker that cannot render a new purpose', () => {
  const supabaseKey = randomBytes(32)
  const f = useWebStack({
    worker: false,
    webhooks: {
      KRATOS_COURIER_API_KEY: KRATOS_KEY,
      KRATOS_LINK_ORIGINS: ['https://auth.example.org'],
      SUPABASE_HOOK_SECRET: `v1,whsec_${supabaseKey.toString('base64')}`,
      SUPABASE_LINK_ORIGINS: ['https://project-ref.supabase.co'],
    },
  })
  const kit = courierKit(f)
  const sessions: Knex[] = []
  /** Connects sessions of the worker login under these names, and has the web take its census now. */
  async function fleet(names: readonly string[]) {
    for (const applicationName of names) {
      const session = createKnex(f.db.workerUrl, { applicationName, max: 1 })
      sessions.push(session)
      await session.raw('SELECT 1')
    }
    await f.stack.web.formats.refresh()
  }
  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((session) => session.destroy()))
    await f.stack.web.formats.refresh()
  })
  const jobs = async () => Number((await f.db.owner('pgboss.job').where({ name: 'security-outbox' }).count({ n: '*' }))[0]!.n)
  const written = async () => ({ rows: await rowCounts(f.db.owner), jobs: await jobs() })

  const courierCode = async (key: string) =>
    await kit.send(key, {
      purpose: 'verification_code',
      channel: 'email',
      destination: uniqueEmail('courier'),
      secret: { code: '482913' },
      expiresAt: inMinutes(10),
    })
  const kratos = async (templateType: string, fields: Record<string, unknown>) => {
    const address = uniqueEmail('kratos')
    const body = { recipient: address, to: address, template_type: templateType, subject: null, body: null, ...fields }
    return await f.stack.call('POST', '/hooks/kratos/courier', body, { authorization: `Bearer ${KRATOS_KEY}` })
  }
  const supabaseMagicLink = async () => {
    const email_data = {
      token: '305805',
      token_hash: randomBytes(28).toString('hex'),
      redirect_to: 'https://app.example.org/welcome',
      email_action_type: 'magiclink',
      site_url: 'https://project-ref.supabase.co/auth/v1',
      token_new: '',
      token_hash_new: '',
    }
    const text = JSON.stringify({ user: { id: randomUUID(), email: uniqueEmail('supabase') }, email_data })
    const id = randomUUID()
    const at = new Date()
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(supabaseKey, { format: 'raw' }).sign(id, at, text),
    }
    return await f.stack.call('POST', '/hooks/supabase/send-email', text, headers)
  }
  const signUp = async () => await f.stack.call('POST', '/sign-ups', { identifier: uniqueEmail('sign-up'), password: randomUUID() })

  it('a live 0.2.0 worker: the courier and both hooks refuse a new purpose retryably (503, Retry-After, upgrade_in_progress) and enqueue nothing', async () => {
    await fleet([...THIS_RELEASE_SESSIONS, ...RELEASE_020_SESSIONS])
    const { key } = await kit.apiKey()
    const before = await written()

    const courier = await courierCode(key)
    expect([courier.status, courier.body?.code]).to.deep.equal([503, 'upgrade_in_progress'])
    expect(courier.headers.get('retry-after')).to.match(/^[1-9]\d*$/)

    const kratosCode = await kratos('verification_code_valid', { verification_code: '445566' })
    expect([kratosCode.status, kratosCode.body?.code]).to.deep.equal([503, 'upgrade_in_progress'])
    expect(kratosCode.headers.get('retry-after')).to.match(/^[1-9]\d*$/)

    // Supabase reads a refusal only from a 200 (docs/hooks.md): it answers its user with error.http_code.
    const supabase = await supabaseMagicLink()
    expect(supabase.status).to.equal(200)
    expect(supabase.body).to.deep.include({ code: 'upgrade_in_progress' })
    expect(supabase.body?.error).to.deep.include({ http_code: 503 })
    expect(supabase.headers.get('retry-after')).to.match(/^[1-9]\d*$/)

    expect(await written(), 'nothing written or enqueued').to.deep.equal(before)
  })

  it('a live 0.2.0 worker: purposes it renders are accepted (the identity flow’s sign-up, a hook’s sign-up code)', async () => {
    await fleet([...THIS_RELEASE_SESSIONS, ...RELEASE_020_SESSIONS])
    const queued = await jobs()
    expect((await signUp()).status).to.equal(202)
    expect((await kratos('registration_code_valid', { registration_code: '101112' })).status).to.equal(200)
    expect(await jobs()).to.equal(queued + 2)
  })

  it('only this release’s workers: the courier, both hooks and the sign-up are accepted', async () => {
    await fleet(THIS_RELEASE_SESSIONS)
    const { key } = await kit.apiKey()
    const queued = await jobs()
    expect((await courierCode(key)).status).to.equal(202)
    expect((await kratos('verification_code_valid', { verification_code: '445566' })).status).to.equal(200)
    const supabase = await supabaseMagicLink()
    expect([supabase.status, supabase.body]).to.deep.equal([200, {}])
    expect((await signUp()).status).to.equal(202)
    expect(await jobs()).to.equal(queued + 4)
  })

  it('no worker connected: a new purpose is accepted and waits for the next worker', async () => {
    await fleet([])
    const { key } = await kit.apiKey()
    expect((await courierCode(key)).status).to.equal(202)
  })
})
