import { expect } from 'chai'
import type { Knex } from 'knex'
import { WITHOUT_PROVIDER_WAIT_MS } from '../jobs/deliver-holds.ts'
import { envelopeContext, open, READABLE_ENVELOPE_VERSIONS } from '../src/crypto/envelope.ts'
import { createKnex } from '../src/db/knex.ts'
import { createWorkerMetrics } from '../src/metrics/worker-metrics.ts'
import {
  loadEnvelopeNegotiation,
  negotiateEnvelopeVersion,
  readerApplicationName,
  versionsReadBy,
} from '../src/outbox/envelope-negotiation.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { deliverOne } from './support/run-once.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

/** How 0.1.0 (8551a84) names its worker's sessions: no announcement, so it opens v1 only. */
const OLD_WORKER_SESSIONS = ['sealpost-worker', 'sealpost-worker-boss']
const NEW_WORKER_SESSIONS = [readerApplicationName('sealpost-worker'), readerApplicationName('sealpost-worker-boss')]

describe('envelope format negotiation: the version a web seals', () => {
  const census = (liveWorkers: string[], legacyFleetRegistered = false) => ({ liveWorkers, legacyFleetRegistered })
  const table: [string, ReturnType<typeof census>, string][] = [
    ['only workers that announce v1,v2', census(NEW_WORKER_SESSIONS), 'v2'],
    ['a 0.1.0 worker beside new ones, during the upgrade window', census([...OLD_WORKER_SESSIONS, ...NEW_WORKER_SESSIONS], true), 'v1'],
    ['a 0.1.0 worker alone, during the upgrade window', census(OLD_WORKER_SESSIONS, true), 'v1'],
    ['an unannounced session after the upgrade window (no reader)', census([...OLD_WORKER_SESSIONS, ...NEW_WORKER_SESSIONS]), 'v2'],
    ['a session announcing only v1 after the upgrade window (below the floor)', census(['sealpost-worker;envelopes=v1']), 'v2'],
    ['a newer worker that reads v2 and v3 beside this release', census([...NEW_WORKER_SESSIONS, 'sealpost-worker;envelopes=v2,v3']), 'v2'],
    ['a fleet sharing no version with this web, after the window', census(['sealpost-worker;envelopes=v3']), 'v2'],
    ['a fleet sharing no version with this web, during the window', census(['sealpost-worker;envelopes=v3'], true), 'v1'],
    ['no worker, on a database the previous fleet never served', census([]), 'v2'],
    ['no worker, during the upgrade window', census([], true), 'v1'],
  ]
  for (const [fleet, readers, version] of table)
    it(`seals ${version} for ${fleet}`, () => expect(negotiateEnvelopeVersion(readers)).to.equal(version))

  it('ENVELOPE_VERSION pins the version whatever the fleet reads', () => {
    expect(negotiateEnvelopeVersion(census(OLD_WORKER_SESSIONS, true), 'v2')).to.equal('v2')
    expect(negotiateEnvelopeVersion(census(NEW_WORKER_SESSIONS), 'v1')).to.equal('v1')
  })

  it('a worker announces what this release opens, within PostgreSQL’s 63-byte application name', () => {
    expect(readerApplicationName('sealpost-worker-boss')).to.equal('sealpost-worker-boss;purposes=3;envelopes=v1,v2')
    expect(Buffer.byteLength(readerApplicationName('sealpost-worker-boss'))).to.be.at.most(63)
    expect(versionsReadBy(readerApplicationName('sealpost-worker'))).to.deep.equal([...READABLE_ENVELOPE_VERSIONS])
    expect(versionsReadBy('sealpost-worker-boss')).to.deep.equal(['v1'])
  })
})

describe('envelope format negotiation against the real roles', () => {
  const f = useOutboxFixture()
  const sessions: Knex[] = []
  /** A session of the worker login named as a worker of one release or the other names it. */
  const workerSession = async (applicationName: string) => {
    const session = createKnex(f.db.workerUrl, { applicationName, max: 1 })
    sessions.push(session)
    await session.raw('SELECT 1')
    return session
  }
  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((session) => session.destroy()))
  })
  const negotiation = async (refreshMs?: number) => {
    const loaded = await loadEnvelopeNegotiation({ db: f.harness.api, logger: f.logs.logger, refreshMs })
    negotiations.push(loaded)
    return loaded
  }
  const negotiations: { stop(): void }[] = []
  afterEach(() => {
    for (const loaded of negotiations.splice(0)) loaded.stop()
  })
  const envelopeOf = async (messageId: string): Promise<string> =>
    (await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).first()).envelope

  /** Says when this database ran the release that wrote the previous fleet's stand-in (0600). */
  const upgradedAgo = async (minutes: number) => {
    await f.db.owner.raw(
      `UPDATE public.knex_migrations SET migration_time = now() - make_interval(mins => ?)
        WHERE name = '20261202000600_delivery_channel_registrations'`,
      [minutes],
    )
  }
  const standIn = async (worker: Knex) => {
    await worker.raw(
      `INSERT INTO outbox.delivery_channel_registrations (worker_id, channels, providers, started_at, seen_at)
       VALUES ('00000000-0000-0000-0000-000000000000', '{email,whatsapp}', '{}', now(), now())
       ON CONFLICT (worker_id) DO UPDATE SET seen_at = now()`,
    )
  }

  it('a stolen worker login cannot downgrade sealing to v1 (which binds no destination) once the upgrade window has passed', async () => {
    await upgradedAgo(31)
    // The attacker connects as the previous release's worker and keeps its stand-in registration current.
    const attacker = await workerSession('sealpost-worker-boss')
    await standIn(attacker)
    await workerSession(readerApplicationName('sealpost-worker-boss'))
    await workerSession('sealpost-worker;envelopes=v1')
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 3_600, (await negotiation()).version)
    expect(await envelopeOf(messageId)).to.match(/^v2\./)
  })

  it('the api login sees the application names of the worker login’s sessions (what the census relies on)', async () => {
    await workerSession('sealpost-worker-boss')
    const { rows } = await f.harness.api.raw<{ rows: { application_name: string }[] }>(
      'SELECT application_name FROM pg_stat_activity WHERE datname = current_database()',
    )
    expect(rows.map((row) => row.application_name)).to.include('sealpost-worker-boss')
  })

  it('during the upgrade window, a live 0.1.0 worker makes the web seal v1, bound to message id and purpose, which a worker of this release sends too', async () => {
    await standIn(f.db.owner)
    for (const name of OLD_WORKER_SESSIONS) await workerSession(name)
    for (const name of NEW_WORKER_SESSIONS) await workerSession(name)
    const email = uniqueEmail()
    const { messageId } = await f.harness.enqueue(email, 3_600, (await negotiation()).version)

    const envelope = await envelopeOf(messageId)
    expect(envelope).to.match(/^v1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/)
    // v1 binds no channel or destination: it opens under any of them (docs/security.md).
    expect(() =>
      open(f.keys.outboxKey, envelope, envelopeContext(messageId, 'password_recovery', 'whatsapp', '+15550000000')),
    ).not.to.throw()
    const provider = scriptedProvider(() => ({ providerMessageId: 'sent' }))
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(1)
    expect(await f.rows.message(messageId)).to.include({ state: 'published' })
  })

  it('only workers that announce v2 make the web seal v2, bound to channel and destination as well', async () => {
    for (const name of NEW_WORKER_SESSIONS) await workerSession(name)
    const { messageId } = await f.harness.enqueue(uniqueEmail(), 3_600, (await negotiation()).version)
    const envelope = await envelopeOf(messageId)
    expect(envelope).to.match(/^v2\./)
    expect(() => open(f.keys.outboxKey, envelope, envelopeContext(messageId, 'password_recovery', 'whatsapp', '+15550000000'))).to.throw()
  })

  it('with no worker connected, seals v2 unless the upgrade window from 0.1.0 is open (its stand-in written by a release within 30 minutes)', async () => {
    expect((await negotiation()).version()).to.equal('v2')
    await standIn(f.db.owner)
    expect((await negotiation()).version()).to.equal('v1')
    await upgradedAgo(31)
    expect((await negotiation()).version()).to.equal('v2')
  })

  it('re-reads the fleet in the background, so the web moves to v2 once the last 0.1.0 worker left, and back when one returns', async () => {
    await standIn(f.db.owner)
    const old = await workerSession('sealpost-worker-boss')
    await workerSession(readerApplicationName('sealpost-worker-boss'))
    const web = await negotiation(50)
    expect(web.version()).to.equal('v1')
    await old.destroy()
    await eventually(async () => (web.version() === 'v2' ? true : undefined), 'the web to seal v2')
    await workerSession('sealpost-worker')
    await eventually(async () => (web.version() === 'v1' ? true : undefined), 'the web to seal v1 again')
  })
})

describe('a worker meeting an envelope version it does not know', () => {
  const f = useOutboxFixture()

  /** What a newer release's expand migration and web would do: accept and write a `v3` envelope. */
  const sealedByANewerRelease = async (ttlSeconds: number) => {
    const { messageId } = await f.harness.enqueue(uniqueEmail(), ttlSeconds)
    await f.db.owner.raw(`
      ALTER TABLE outbox.security_outbox_ciphertexts
        DROP CONSTRAINT security_outbox_ciphertexts_envelope_check,
        ADD CONSTRAINT security_outbox_ciphertexts_envelope_check CHECK (envelope ~ '^v[0-9]+[.]')`)
    const v3 = 'v3.k9.c2FsdA.aXY.Ym9keQ.dGFn'
    await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).update({ envelope: v3 })
    return { messageId, v3 }
  }

  it('puts the message back for another process without spending an attempt: a MISCONFIGURATION line, counted, not dead-lettered', async () => {
    const { messageId, v3 } = await sealedByANewerRelease(3_600)
    const provider = scriptedProvider(() => ({ providerMessageId: 'never' }))
    const metrics = createWorkerMetrics()
    const worker = { ...f.harness.deps({ email: provider }), metrics }

    await deliverOne(worker, await f.harness.nextJob())
    await deliverOne(worker, await f.harness.nextJob())

    expect(provider.calls).to.have.length(0)
    expect(await f.rows.message(messageId)).to.include({ state: 'pending', attempt_count: 0, lease_job_id: null })
    expect(await f.rows.attempts(messageId)).to.have.length(0)
    expect(await f.rows.ciphertexts(messageId)).to.equal(1)
    const next = await f.db.owner('pgboss.job').where({ name: QUEUES.delivery, state: 'created' }).first()
    expect(next.data).to.deep.equal({ messageId })
    expect(next.start_after.getTime()).to.be.closeTo(f.now.getTime() + WITHOUT_PROVIDER_WAIT_MS, 1_000)
    const counted = await metrics.registry.getSingleMetricAsString('sealpost_messages_unreadable_format_total')
    expect(counted).to.match(/^sealpost_messages_unreadable_format_total\{format="v3"\} 2$/m)
    const lines = f.logs
      .text()
      .split('\n')
      .filter((line) => line.includes('MISCONFIGURATION'))
    expect(lines, 'logged once a minute').to.have.length(1)
    expect(JSON.parse(lines[0]!)).to.include({ format: 'v3', messageId })
    expect(f.logs.text()).not.to.include(v3).and.not.to.include('SECURITY')
  })

  it('expiry still wins: a code that would expire in the wait is dead-lettered as expired, never decryption_failed', async () => {
    const { messageId } = await sealedByANewerRelease(30)
    await deliverOne(f.harness.deps({ email: scriptedProvider(() => ({ providerMessageId: 'never' })) }), await f.harness.nextJob())
    expect(await f.rows.message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 0 })
    expect(await f.rows.deadLetter(messageId)).to.include({ reason: 'challenge_expired' })
  })
})
