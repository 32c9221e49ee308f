import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { createVerifiedIdentity, eventually, inbox, testKeys, uniqueEmail } from './support/helpers.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { bareEnvironment, procfileCommand, productionEnvironment, spawnCollecting } from './support/processes.ts'
import { checkedFetch } from './support/api-check.ts'
import { embeddedPostgresPid, isAlive } from './support/npm-start.ts'

describe('npm start on a fresh checkout', () => {
  let dataDir: string
  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'sealpost-start-'))
    // Like a fresh clone's folder (mkdtemp's 0700 would shut out the `postgres` user PostgreSQL runs as under root).
    await chmod(dataDir, 0o755)
  })
  after(async () => {
    await rm(dataDir, { recursive: true, force: true })
  })

  it('comes up with embedded PostgreSQL, the SES emulator and the fake Cloud API, serves the flow, and stops cleanly on SIGTERM', async function () {
    this.timeout(120_000)
    const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
    const app = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      await app.waitFor(/Operator console on/, 'the start banner')
      // The banner says what the web binds (every interface) and a URL that works on this machine.
      expect(app.output()).to.match(/Sealpost API on http:\/\/127\.0\.0\.1:(\d+) \(listening on 0\.0\.0\.0:\1, every interface\)/)
      const [, apiUrl] = await app.waitFor(/Sealpost API on (http:\/\/\S+)/, 'the API to listen')
      const [, inboxUrl] = await app.waitFor(/SES emulator inbox viewer on (http:\/\/\S+)/, 'the inbox viewer')
      // A newcomer's first click: the development index links the docs, the console and this inbox.
      const index = await fetch(`${apiUrl}/`)
      expect(index.status).to.equal(200)
      expect(await index.text())
        .to.include(`href="${inboxUrl}"`)
        .and.include('href="/platform-admin/"')
      expect((await fetch(`${apiUrl}/join`)).status).to.equal(200)

      const email = uniqueEmail('newcomer')
      const identity = spawnCollecting('npm', ['run', 'dev:identity', '--', email], { env })
      expect(await identity.exited, identity.output()).to.equal(0)
      expect(identity.output()).to.include('created a verified email identity')

      const response = await checkedFetch(`${apiUrl}/password-recoveries`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: email }),
      })
      expect(response.status).to.equal(202)
      const [mail] = await eventually(async () => {
        const mails = await inbox(inboxUrl!, email)
        return mails.length > 0 ? mails : undefined
      }, 'the code to reach the emulator inbox')
      expect(mail!.body.text).to.match(/\b\d{6}\b/)
      // No WhatsApp provider configured: WhatsApp goes to the local fake Cloud API, so a phone is a channel.
      const phoneSignUp = await checkedFetch(`${apiUrl}/sign-ups`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: '+447911123456', password: 'correct horse battery' }),
      })
      expect(phoneSignUp.status).to.equal(202)
      await app.waitFor(
        /"message":"delivery recorded"[^\n]*"channel":"whatsapp"[^\n]*"provider":"whatsapp_cloud"[^\n]*"kind":"published"/,
        'the code sent to the fake Cloud API',
      )
      expect((await checkedFetch(`${apiUrl}/readyz`)).status).to.equal(200)
    } finally {
      // The whole group, as a terminal's Ctrl-C would: npm and the node process under it.
      try {
        process.kill(-app.child.pid!, 'SIGTERM')
      } catch {
        // already gone; the assertions below say why
      }
      await app.exited
    }
    expect(app.output()).to.include('"message":"web stopped"').and.to.include('"message":"worker stopped"')
  })

  it('stops everything when npm start itself is sent SIGTERM by its pid, as a supervisor or docker stop does', async function () {
    this.timeout(120_000)
    const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
    const app = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      const [, apiUrl] = await app.waitFor(/Sealpost API on (http:\/\/\S+)/, 'the API to listen')
      const [, inboxUrl] = await app.waitFor(/SES emulator inbox viewer on (http:\/\/\S+)/, 'the inbox viewer')
      const postgres = await embeddedPostgresPid(dataDir)
      expect(isAlive(postgres), 'the embedded PostgreSQL runs').to.equal(true)

      const npmExited = new Promise((resolve) => app.child.once('exit', resolve))
      process.kill(app.child.pid!, 'SIGTERM')
      await npmExited
      await eventually(async () => ((await refuses(apiUrl!)) ? true : undefined), 'the API port to close', 30_000)
      await eventually(async () => ((await refuses(inboxUrl!)) ? true : undefined), 'the inbox port to close', 30_000)
      await eventually(async () => (isAlive(postgres) ? undefined : true), 'the embedded PostgreSQL to stop', 30_000)
      expect(app.output()).to.include('"message":"web stopped"').and.to.include('"message":"worker stopped"')
    } finally {
      // Whatever the assertions found, leave nothing of this run behind.
      try {
        process.kill(-app.child.pid!, 'SIGKILL')
      } catch {
        // the group is gone, as it should be
      }
    }
  })
})

async function refuses(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(2_000) })
    return false
  } catch (error) {
    return (error as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED'
  }
}

describe('Procfile processes', () => {
  let db: TestDatabase
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>
  const keys = testKeys()
  const production = () =>
    productionEnvironment({
      apiUrl: db.apiUrl,
      workerUrl: db.workerUrl,
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'procfile-test-key',
    })

  before(async () => {
    db = await createTestDatabase()
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('procfile-test-key')
  })
  after(async () => {
    await wasender.stop()
    await emulator.stop()
    await db.drop()
  })

  it('runs web and worker as separate processes that deliver a code and stop gracefully on SIGTERM', async function () {
    this.timeout(60_000)
    // The worker first: the web offers the channels the workers registered (docs/delivery.md "Channels").
    const worker = spawnCollecting('sh', ['-c', procfileCommand('worker')], { env: production() })
    await worker.waitFor(/"message":"worker started"/, 'the worker to start')
    const web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env: production() })
    const [, url] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')

    const email = uniqueEmail('procfile')
    await createVerifiedIdentity(db.owner, email)
    expect((await checkedFetch(`${url}/healthz`)).status).to.equal(200)
    for (const page of ['/', '/join']) expect((await fetch(`${url}${page}`)).status, `${page} in production`).to.equal(404)
    const response = await checkedFetch(`${url}/password-recoveries`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: email }),
    })
    expect(response.status).to.equal(202)
    await eventually(async () => ((await inbox(emulator.url, email)).length > 0 ? true : undefined), 'the worker process to deliver')

    web.child.kill('SIGTERM')
    worker.child.kill('SIGTERM')
    expect(await web.exited, web.output()).to.equal(0)
    expect(await worker.exited, worker.output()).to.equal(0)
    expect(web.output()).to.include('"message":"web stopped"')
    expect(worker.output()).to.include('"message":"worker stopped"')
    expect(web.output() + worker.output()).not.to.include(email)
  })

  it('refuses to start web without its database URL in production, naming the variable and no secret', async () => {
    const env = production()
    delete env.API_DATABASE_URL
    const web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env })
    expect(await web.exited).to.equal(1)
    expect(web.output()).to.include('API_DATABASE_URL')
    expect(web.output()).not.to.include(env.OUTBOX_ENCRYPTION_KEYS!.split(':')[1]!)
  })

  it('refuses to start web connected as the database owner', async () => {
    const web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env: { ...production(), API_DATABASE_URL: db.ownerUrl } })
    expect(await web.exited).to.equal(1)
    expect(web.output()).to.include('API_DATABASE_URL connects as')
    expect(web.output()).not.to.include(new URL(db.ownerUrl).password)
  })

  it('runs a production worker with email settings only: it starts, delivers email, and phones are refused as channel_unavailable', async function () {
    this.timeout(90_000)
    // A database of its own: the other test's worker registered WhatsApp on the shared one.
    const own = await createTestDatabase()
    const env = productionEnvironment({
      apiUrl: own.apiUrl,
      workerUrl: own.workerUrl,
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'procfile-test-key',
    })
    delete env.WASENDER_API_URL
    delete env.WASENDER_API_KEY
    const worker = spawnCollecting('sh', ['-c', procfileCommand('worker')], { env })
    let web: ReturnType<typeof spawnCollecting> | undefined
    try {
      await worker.waitFor(/"message":"worker started"/, 'the email-only worker to start')
      web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env })
      const [, url] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')
      const email = uniqueEmail('email-only')
      await createVerifiedIdentity(own.owner, email)
      const recover = (identifier: string) =>
        checkedFetch(`${url}/password-recoveries`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ identifier }),
        })
      expect((await recover(email)).status).to.equal(202)
      await eventually(async () => ((await inbox(emulator.url, email)).length > 0 ? true : undefined), 'the email-only worker to deliver')
      const phone = await recover('+447911123456')
      expect(phone.status).to.equal(422)
      expect(await phone.json()).to.include({ code: 'channel_unavailable' })
      expect(await own.owner('outbox.delivery_channel_registrations').pluck('channels')).to.deep.equal([['email']])
    } finally {
      web?.child.kill('SIGTERM')
      worker.child.kill('SIGTERM')
      await web?.exited
      expect(await worker.exited, worker.output()).to.equal(0)
      await own.drop()
    }
  })

  it('accepts the first sign-ups on a fresh database before any worker registered (web and worker deployed together, the worker slower), and the codes arrive once it is up', async function () {
    this.timeout(90_000)
    // A database no worker has ever registered against, as on a first deploy.
    const fresh = await createTestDatabase()
    const env = productionEnvironment({
      apiUrl: fresh.apiUrl,
      workerUrl: fresh.workerUrl,
      keys,
      sesEndpoint: emulator.url,
      wasenderUrl: wasender.url,
      wasenderKey: 'procfile-test-key',
      extra: { PHONE_CHANNELS: 'whatsapp' },
    })
    // Web and worker started together; the sign-ups go in the moment the web listens, before the worker has registered.
    const web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env })
    let worker: ReturnType<typeof spawnCollecting> | undefined
    try {
      const [, url] = await web.waitFor(/"url":"(http:\/\/[^"]+)"/, 'the web process to listen')
      expect(await fresh.owner('outbox.delivery_channel_registrations'), 'no worker has registered yet').to.deep.equal([])
      const signUp = (identifier: string) =>
        checkedFetch(`${url}/sign-ups`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ identifier, password: 'correct horse battery staple' }),
        })
      const email = uniqueEmail('first-boot')
      expect((await signUp(email)).status, "email: always the web's to offer").to.equal(202)
      const phone = '+447911123456'
      expect((await signUp(phone)).status, 'a phone on the channel PHONE_CHANNELS names').to.equal(202)
      expect(web.output()).to.include('no worker has registered yet')
      worker = spawnCollecting('sh', ['-c', procfileCommand('worker')], { env })
      await eventually(async () => ((await inbox(emulator.url, email)).length > 0 ? true : undefined), 'the first code to arrive', 30_000)
      await eventually(
        async () => (wasender.requests.some((request) => request.to === phone) ? true : undefined),
        'the phone code to arrive',
        30_000,
      )
      expect(await fresh.owner('outbox.security_outbox_messages').where({ destination: phone }).pluck('channel')).to.deep.equal([
        'whatsapp',
      ])
    } finally {
      web.child.kill('SIGTERM')
      worker?.child.kill('SIGTERM')
      expect(await web.exited, web.output()).to.equal(0)
      if (worker) expect(await worker.exited, worker.output()).to.equal(0)
      await fresh.drop()
    }
  })
})
