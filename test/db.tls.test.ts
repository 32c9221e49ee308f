import { rm } from 'node:fs/promises'
import { expect } from 'chai'
import type { Knex } from 'knex'
import pg from 'pg'
import { withLibpqSslModes } from '../src/db/connection-url.ts'
import { createKnex } from '../src/db/knex.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { createVerifiedIdentity, eventually, testKeys, uniqueEmail } from './support/helpers.ts'
import { startOwnCluster, type OwnCluster } from './support/own-cluster.ts'
import { procfileCommand, productionEnvironment, spawnCollecting, type Spawned, stopAll } from './support/processes.ts'
import { makeCertificates, requireTls, withSsl, type TestCertificates } from './support/tls.ts'

describe('sslmode parameters', () => {
  it('gives require, prefer and verify-ca their libpq meaning and leaves verify-full, no-verify and explicit choices alone', () => {
    const url = (query: string) => `postgres://u:p@db.example.com:5432/sealpost?${query}`
    expect(withLibpqSslModes(url('sslmode=require'), {})).to.equal(url('sslmode=require&uselibpqcompat=true'))
    expect(withLibpqSslModes(url('sslmode=verify-ca&sslrootcert=%2Fca.pem'), {})).to.include('uselibpqcompat=true')
    expect(withLibpqSslModes(url('sslmode=prefer'), {})).to.include('uselibpqcompat=true')
    for (const untouched of ['sslmode=verify-full', 'sslmode=no-verify', 'sslmode=require&uselibpqcompat=false', 'application_name=x']) {
      expect(withLibpqSslModes(url(untouched), {})).to.equal(url(untouched))
    }
  })

  it('takes PGSSLMODE and PGSSLROOTCERT from the environment for a URL without sslmode (Heroku’s DATABASE_URL)', () => {
    const bare = 'postgres://u:p@db.example.com:5432/sealpost'
    expect(withLibpqSslModes(bare, { PGSSLMODE: 'require' })).to.equal(`${bare}?sslmode=require&uselibpqcompat=true`)
    expect(withLibpqSslModes(bare, { PGSSLMODE: 'verify-full', PGSSLROOTCERT: '/ca.pem' })).to.equal(
      `${bare}?sslmode=verify-full&sslrootcert=%2Fca.pem`,
    )
    expect(withLibpqSslModes(`${bare}?sslmode=disable`, { PGSSLMODE: 'require' })).to.equal(`${bare}?sslmode=disable`)
  })
})

describe('a TLS-only PostgreSQL (ssl on, hostssl only, a certificate made by the test)', () => {
  let cluster: OwnCluster
  let certificates: TestCertificates
  let strangerCa: TestCertificates
  let owner: Knex
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>
  const keys = testKeys()
  const spawned: Spawned[] = []

  before(async function () {
    this.timeout(120_000)
    cluster = await startOwnCluster()
    certificates = await makeCertificates()
    strangerCa = await makeCertificates('Someone else’s CA')
    await requireTls(cluster.server.databaseDir, cluster.server.serverUrl('postgres'), certificates)
    owner = createKnex(withSsl(cluster.ownerUrl, { sslmode: 'verify-full', sslrootcert: certificates.caCert }), {
      applicationName: 'tls-test-owner',
      max: 2,
    })
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('tls-key')
  })
  after(async function () {
    this.timeout(60_000)
    await stopAll(spawned)
    await owner?.destroy()
    await wasender?.stop()
    await emulator?.stop()
    await cluster?.stop()
    for (const made of [certificates, strangerCa]) if (made) await rm(made.dir, { recursive: true, force: true })
  })

  const env = (ssl: Record<string, string>) => {
    // PGSSLMODE=… stands for a platform-managed URL without TLS parameters (Heroku).
    const { PGSSLMODE, ...inUrl } = ssl
    return productionEnvironment({
      apiUrl: withSsl(cluster.apiUrl, inUrl),
      workerUrl: withSsl(cluster.workerUrl, inUrl),
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'tls-key',
      extra: {
        DATABASE_URL: withSsl(cluster.ownerUrl, inUrl),
        INVITATION_LINK_BASE_URL: 'https://app.sealpost.test',
        DATABASE_WAIT_SECONDS: '5',
        ...(PGSSLMODE ? { PGSSLMODE } : {}),
      },
    })
  }
  const run = (type: 'release' | 'web' | 'worker', ssl: Record<string, string>) => {
    const child = spawnCollecting('sh', ['-c', procfileCommand(type)], { env: env(ssl) })
    spawned.push(child)
    return child
  }

  it('refuses a connection without TLS', async () => {
    const client = new pg.Client({ connectionString: withSsl(cluster.ownerUrl, { sslmode: 'disable' }) })
    const failure = await client.connect().then(
      () => undefined,
      (error: unknown) => error as { code?: string },
    )
    await client.end().catch(() => undefined)
    expect(failure?.code).to.equal('28000')
  })

  const modes: [string, () => Record<string, string>][] = [
    ['sslmode=no-verify (managed platforms with self-signed certificates)', () => ({ sslmode: 'no-verify' })],
    ['sslmode=verify-full with sslrootcert', () => ({ sslmode: 'verify-full', sslrootcert: certificates.caCert })],
    ['sslmode=require against the self-signed chain (libpq meaning: encrypted, not verified)', () => ({ sslmode: 'require' })],
    ['URLs without sslmode and PGSSLMODE=require in the environment (Heroku’s shape)', () => ({ PGSSLMODE: 'require' })],
  ]
  for (const [mode, ssl] of modes) {
    it(`runs release, web and worker over ${mode} and delivers a code`, async function () {
      this.timeout(90_000)
      const release = run('release', ssl())
      expect(await release.exited, release.output()).to.equal(0)
      // The worker first, as docs/delivery.md "Channels" says: the web offers the channels workers registered.
      const worker = run('worker', ssl())
      await worker.waitFor(/"message":"worker started"/, 'the worker to start')
      const web = run('web', ssl())
      const [, url] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web to listen')

      const email = uniqueEmail('tls')
      await createVerifiedIdentity(owner, email)
      const response = await fetch(`${url}/password-recoveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: email }),
      })
      expect(response.status).to.equal(202)
      await eventually(
        async () =>
          (await owner('outbox.security_outbox_messages').where({ destination: email }).first())?.state === 'published' ? true : undefined,
        'the code to be delivered',
        30_000,
      )

      const sessions: { application_name: string; ssl: boolean }[] = (
        await owner.raw(
          `SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name LIKE 'sealpost-%'`,
        )
      ).rows
      expect(sessions.map((session) => session.application_name)).to.include.members([
        'sealpost-web',
        'sealpost-worker;purposes=3;envelopes=v1,v2',
      ])
      expect(sessions.filter((session) => !session.ssl)).to.deep.equal([])

      web.child.kill('SIGTERM')
      worker.child.kill('SIGTERM')
      expect(await web.exited, web.output()).to.equal(0)
      expect(await worker.exited, worker.output()).to.equal(0)
      expect(release.output() + web.output() + worker.output()).not.to.include('SECURITY WARNING')
    })
  }

  it('refuses to start against a certificate its sslrootcert did not sign (verify-full), at once and without a secret', async function () {
    this.timeout(60_000)
    const web = run('web', { sslmode: 'verify-full', sslrootcert: strangerCa.caCert })
    expect(await web.exited).to.equal(1)
    expect(web.output()).not.to.include('waiting for the database')
    expect(web.output()).to.match(/web failed to start: \{"errorName":"Error","errorCode":"[A-Z_]+"\}/)
    expect(web.output()).not.to.include(new URL(cluster.apiUrl).password)
  })
})
