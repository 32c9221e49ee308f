import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import pg from 'pg'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { withCredentials } from '../src/db/knex.ts'
import { createKnex } from '../src/db/knex.ts'
import { createTestDatabase } from './support/database.ts'
import { testCluster } from './support/root-hooks.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { createVerifiedIdentity, eventually, inbox, testKeys, uniqueEmail } from './support/helpers.ts'
import { bareEnvironment, procfileCommand, productionEnvironment, spawnCollecting, type Spawned, stopAll } from './support/processes.ts'

/**
 * Heroku-class managed PostgreSQL (docs/deploying.md "Database roles in production"): the owner is NOSUPERUSER NOCREATEROLE and the
 * platform made the login roles. Everything runs as the Procfile runs it.
 */
describe('managed PostgreSQL without CREATEROLE', () => {
  const suffix = randomBytes(4).toString('hex')
  const names = {
    owner: `mgd_owner_${suffix}`,
    web: `mgd_web_${suffix}`,
    worker: `mgd_worker_${suffix}`,
    database: `mgd_db_${suffix}`,
    foreign: `mgd_foreign_${suffix}`,
  }
  const passwords = {
    owner: randomBytes(12).toString('hex'),
    web: randomBytes(12).toString('hex'),
    worker: randomBytes(12).toString('hex'),
  }
  const spawned: Spawned[] = []
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>

  async function admin(sql: string): Promise<void> {
    const client = new pg.Client({ connectionString: testCluster().ownerUrl('postgres') })
    await client.connect()
    try {
      await client.query(sql)
    } finally {
      await client.end()
    }
  }
  const url = (database: string, login: 'owner' | 'web' | 'worker') =>
    withCredentials(testCluster().ownerUrl(database), names[login], passwords[login])
  function run(type: 'release' | 'web' | 'worker', env: NodeJS.ProcessEnv): Spawned {
    const process = spawnCollecting('sh', ['-c', procfileCommand(type)], { env })
    spawned.push(process)
    return process
  }
  const releaseEnv = (database: string, extra: Record<string, string> = {}) =>
    bareEnvironment({ NODE_ENV: 'production', DATABASE_URL: url(database, 'owner'), ...extra })
  const namedRoles = { SEALPOST_API_ROLE: names.web, SEALPOST_WORKER_ROLE: names.worker }

  before(async function () {
    this.timeout(60_000)
    await admin(`CREATE ROLE ${names.owner} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD '${passwords.owner}'`)
    await admin(`CREATE ROLE ${names.web} LOGIN NOSUPERUSER PASSWORD '${passwords.web}'`)
    await admin(`CREATE ROLE ${names.worker} LOGIN NOSUPERUSER PASSWORD '${passwords.worker}'`)
    await admin(`CREATE DATABASE ${names.database} OWNER ${names.owner}`)
    // A database the owner may connect to but does not own: the release cannot create schemas there.
    await admin(`CREATE DATABASE ${names.foreign}`)
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('managed-key')
  })
  after(async function () {
    this.timeout(60_000)
    await stopAll(spawned)
    await wasender?.stop()
    await emulator?.stop()
    for (const database of [names.database, names.foreign]) await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    for (const role of [names.web, names.worker, names.owner]) await admin(`DROP ROLE IF EXISTS ${role}`)
  })

  it('stops a release with neither role named, saying exactly what to run, before changing anything', async function () {
    this.timeout(60_000)
    const release = run('release', releaseEnv(names.database))
    expect(await release.exited, release.output()).to.equal(1)
    const output = release.output()
    expect(output).to.include(`the owner role ${names.owner} (DATABASE_URL) may not create roles (no CREATEROLE)`)
    expect(output).to.include('heroku pg:credentials:create DATABASE --name sealpost_web')
    expect(output).to.include('heroku config:set SEALPOST_API_ROLE=sealpost_web SEALPOST_WORKER_ROLE=sealpost_worker')
    expect(output).to.include('CREATE ROLE sealpost_api NOLOGIN; CREATE ROLE sealpost_worker NOLOGIN;')
    expect(output).not.to.include(passwords.owner)
    const owner = createKnex(url(names.database, 'owner'), { applicationName: 'test-managed' })
    try {
      expect((await owner.raw("SELECT to_regclass('public.knex_migrations') AS t")).rows[0].t, 'nothing migrated').to.equal(null)
    } finally {
      await owner.destroy()
    }
  })

  it('stops a release naming a role that does not exist, naming the variable', async function () {
    this.timeout(60_000)
    const release = run(
      'release',
      releaseEnv(names.database, { SEALPOST_API_ROLE: `nobody_${suffix}`, SEALPOST_WORKER_ROLE: names.worker }),
    )
    expect(await release.exited).to.equal(1)
    expect(release.output()).to.include(`SEALPOST_API_ROLE names the role nobody_${suffix}, which does not exist`)
  })

  it("shows PostgreSQL's own message and the remedy when the database refuses the release (42501)", async function () {
    this.timeout(60_000)
    const release = run('release', releaseEnv(names.foreign, namedRoles))
    expect(await release.exited).to.equal(1)
    const output = release.output()
    expect(output).to.match(/release failed: permission denied for (database|schema) \S+ \(SQLSTATE 42501\)/)
    expect(output).to.include("what to do: DATABASE_URL must be the database's owner")
    expect(output).not.to.include(passwords.owner)
  })

  it('releases with SEALPOST_API_ROLE / SEALPOST_WORKER_ROLE, then web and worker run as those roles and deliver a code', async function () {
    this.timeout(120_000)
    const release = run('release', releaseEnv(names.database, { ...namedRoles, LEASE_SECONDS: '60' }))
    expect(await release.exited, release.output()).to.equal(0)
    expect(release.output()).to.include('"message":"release complete"')

    const keys = testKeys()
    const env = productionEnvironment({
      apiUrl: url(names.database, 'web'),
      workerUrl: url(names.database, 'worker'),
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'managed-key',
      extra: namedRoles,
    })
    // The worker first: the web offers the channels the workers registered (as the named worker role).
    const worker = run('worker', env)
    await worker.waitFor(/"message":"worker started"/, 'the worker to start')
    const web = run('web', env)
    const [, api] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')

    const owner = createKnex(url(names.database, 'owner'), { applicationName: 'test-managed' })
    const asWeb = createKnex(url(names.database, 'web'), { applicationName: 'test-managed-web' })
    try {
      const email = uniqueEmail('managed')
      await createVerifiedIdentity(owner, email)
      const response = await fetch(`${api}/password-recoveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: email }),
      })
      expect(response.status).to.equal(202)
      const published = async () => {
        const message = await owner('outbox.security_outbox_messages').where({ destination: email }).first()
        return message?.state === 'published' ? message : undefined
      }
      expect(await eventually(published, 'the code to be delivered and recorded', 20_000)).to.include({ attempt_count: 1 })
      expect(await inbox(emulator.url, email)).to.have.length(1)
      // Least privilege holds for the named roles as for the group roles.
      const refused = await asWeb('outbox.security_outbox_ciphertexts')
        .select('envelope')
        .then(
          () => 'allowed',
          (error: { code?: string }) => error.code,
        )
      expect(refused).to.equal('42501')
    } finally {
      await Promise.all([owner.destroy(), asWeb.destroy()])
    }

    // A guard still holds: the web refuses to start as the worker's role.
    const crossed = run('web', { ...env, API_DATABASE_URL: url(names.database, 'worker') })
    expect(await crossed.exited).to.equal(1)
    expect(crossed.output()).to.include(`API_DATABASE_URL connects as a role that is not a member of ${names.web}`)

    // A second release (every deploy runs one) is a no-op that still succeeds.
    const again = run('release', releaseEnv(names.database, namedRoles))
    expect(await again.exited, again.output()).to.equal(0)
  })

  it('stops a release that switches a database installed for the group roles to named roles that do not hold their grants, saying what to grant', async function () {
    this.timeout(60_000)
    const installed = await createTestDatabase()
    try {
      const release = run('release', bareEnvironment({ NODE_ENV: 'production', DATABASE_URL: installed.ownerUrl, ...namedRoles }))
      expect(await release.exited).to.equal(1)
      expect(release.output()).to.include(`GRANT sealpost_api TO ${names.web}; GRANT sealpost_worker TO ${names.worker};`)
    } finally {
      await installed.drop()
    }
  })
})
