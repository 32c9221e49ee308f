import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import pg from 'pg'
import { createKnex } from '../src/db/knex.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { asLogin } from './support/cluster.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { installPreviousRelease, type PreviousRelease } from './support/previous-release.ts'
import { bareEnvironment, procfileCommand, spawnCollecting, stopAll, type Spawned } from './support/processes.ts'
import { testCluster } from './support/root-hooks.ts'

/**
 * Issue 29: a deploy runs the new release step while the previous release's web and worker serve,
 * starts the new processes beside them, then stops the old ones (docs/upgrading.md). Under steady
 * sign-up and recovery traffic, every code answered 202 must reach the provider exactly once,
 * nothing may be dead-lettered by the upgrade, no answer may be 5xx, and a code issued by one
 * version must confirm on the other. Real processes from both trees against one database.
 */

type Version = 'previous' | 'current'
type Web = { version: Version; url: string; process: Spawned; inFlight: number; serving: boolean }
type Accepted = { to: string; purpose: 'sign_up' | 'password_recovery'; by: Version }

const PASSWORD = 'correct horse battery staple upgrade'

/** Same keys for both versions, as an operator keeps them: the single-key form 0.1.0 reads. */
const keys = { outbox: randomBytes(32).toString('base64'), codeHash: randomBytes(32).toString('base64') }

describe('a rolling upgrade from the previous release under traffic', function () {
  this.timeout(240_000)
  let previous: PreviousRelease
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>

  before(async function () {
    this.timeout(300_000)
    previous = await installPreviousRelease()
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender('upgrade-key')
  })
  after(async () => {
    await wasender?.stop()
    await emulator?.stop()
  })

  /** One empty database (no migration: the previous release's release step builds it) and its owner pool. */
  async function emptyDatabase() {
    const cluster = testCluster()
    const name = `sealpost_upgrade_${randomBytes(5).toString('hex')}`
    const admin = new pg.Client({ connectionString: cluster.ownerUrl('postgres') })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.end())
    const ownerUrl = cluster.ownerUrl(name)
    const owner = createKnex(ownerUrl, { applicationName: 'sealpost-test-owner', max: 2 })
    return {
      ownerUrl,
      apiUrl: asLogin(ownerUrl, cluster.logins.api),
      workerUrl: asLogin(ownerUrl, cluster.logins.worker),
      owner,
      async drop() {
        await owner.destroy()
        const client = new pg.Client({ connectionString: cluster.ownerUrl('postgres') })
        await client.connect()
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => client.end())
      },
    }
  }

  /** One deployment: a database, both trees' processes, and traffic against whichever webs serve. */
  /** `lossesExpected`: a dead letter is what the case shows, not a failure to stop at. */
  function deployment(db: Awaited<ReturnType<typeof emptyDatabase>>, currentExtra: Record<string, string> = {}, lossesExpected = false) {
    const spawned: Spawned[] = []
    const webs: Web[] = []
    const accepted: Accepted[] = []
    const statuses: { status: number; route: string; by: Version }[] = []
    const crossConfirmed: string[] = []
    const lost: string[] = []
    let turn = 0
    let traffic = true
    let abandoned = false
    let failure: Error | undefined

    // 0.1.0's minimal production settings; the current release also needs INVITATION_LINK_BASE_URL (CHANGELOG).
    const environment = (version: Version) =>
      bareEnvironment({
        PATH: version === 'previous' ? previous.path : (process.env.PATH ?? ''),
        NODE_ENV: 'production',
        PORT: '0',
        LOG_LEVEL: 'info',
        DATABASE_URL: db.ownerUrl,
        API_DATABASE_URL: db.apiUrl,
        WORKER_DATABASE_URL: db.workerUrl,
        OUTBOX_ENCRYPTION_KEY: keys.outbox,
        CODE_HASH_KEY: keys.codeHash,
        SES_REGION: 'us-east-1',
        SES_FROM_ADDRESS: 'no-reply@sealpost.test',
        SES_ENDPOINT: emulator.url,
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        WASENDER_API_URL: wasender.url,
        WASENDER_API_KEY: 'upgrade-key',
        // Every request of this test comes from one address.
        CLIENT_RATE_LIMIT_PER_MINUTE: '100000',
        ...(version === 'current' ? { INVITATION_LINK_BASE_URL: 'https://app.sealpost.test', ...currentExtra } : {}),
      })
    const run = (version: Version, type: 'release' | 'web' | 'worker') => {
      const command = version === 'previous' ? previous.procfile(type) : procfileCommand(type)
      const child = spawnCollecting('sh', ['-c', command], {
        env: environment(version),
        cwd: version === 'previous' ? previous.dir : undefined,
      })
      spawned.push(child)
      return child
    }

    /**
     * Dead letters but `challenge_consumed`: a person who confirms the moment the email arrives
     * can consume the challenge before the worker has recorded the send, and the web then closes
     * the message (delivered and used: nothing lost, and the email counts prove it came once).
     */
    const upgradeDeadLetters = async (): Promise<{ reason: string }[]> =>
      await db.owner('outbox.security_outbox_dead_letters').whereNot({ reason: 'challenge_consumed' }).select('reason')

    /**
     * A router in front of the webs: round robin over those serving; a stopped web is drained
     * first. A code is confirmed on a web of the other version whenever one serves (`awayFrom`).
     */
    async function call(
      route: string,
      body: unknown,
      options: { shape?: (web: Web) => unknown; awayFrom?: Version } = {},
    ): Promise<{ status: number; by: Version }> {
      const serving = webs.filter((web) => web.serving)
      const other = serving.filter((web) => options.awayFrom !== undefined && web.version !== options.awayFrom)
      const choices = other.length > 0 ? other : serving
      const web = choices[turn++ % choices.length]!
      const { shape } = options
      web.inFlight += 1
      try {
        const response = await fetch(`${web.url}${route}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(shape ? shape(web) : body),
        })
        await response.arrayBuffer()
        statuses.push({ status: response.status, route, by: web.version })
        return { status: response.status, by: web.version }
      } finally {
        web.inFlight -= 1
      }
    }

    /** The code of the `nth` email to `to`, once the emulator has it; undefined if it never comes. */
    async function codeFor(to: string, nth: number, by: Version): Promise<string | undefined> {
      try {
        const email = await eventually(
          async () => {
            if (abandoned) throw new Error('abandoned')
            return (await inbox(emulator.url, to))[nth]
          },
          `email ${nth + 1} to a person`,
          60_000,
        )
        return /is (\d{6})\./.exec(email.body.text ?? '')?.[1]
      } catch (error) {
        const messages: { state: string }[] = await db.owner('outbox.security_outbox_messages').where({ destination: to }).select('state')
        lost.push(
          `${(error as Error).message} (answered by the ${by} web; messages: ${messages.map((row) => row.state).join(', ') || 'none'})`,
        )
        return undefined
      }
    }

    /** A person signs up on one web and confirms on the next, then recovers the password the same way. */
    async function person(): Promise<void> {
      const to = uniqueEmail('upgrade')
      const signUp = await call('/sign-ups', { identifier: to, password: PASSWORD })
      if (signUp.status !== 202) return
      accepted.push({ to, purpose: 'sign_up', by: signUp.by })
      const code = await codeFor(to, 0, signUp.by)
      if (!code) return
      // 0.1.0 takes the code alone; this release also asks for the sign-up's password.
      const confirmed = await call('/sign-ups/confirmation', undefined, {
        shape: (web) => (web.version === 'previous' ? { identifier: to, code } : { identifier: to, code, password: PASSWORD }),
        awayFrom: signUp.by,
      })
      expect(confirmed.status, 'sign-up confirmed').to.equal(201)
      if (confirmed.by !== signUp.by) crossConfirmed.push(`sign-up ${signUp.by} → ${confirmed.by}`)
      const recovery = await call('/password-recoveries', { identifier: to })
      if (recovery.status !== 202) return
      accepted.push({ to, purpose: 'password_recovery', by: recovery.by })
      const recoveryCode = await codeFor(to, 1, recovery.by)
      if (!recoveryCode) return
      const completed = await call(
        '/password-recoveries/completion',
        { identifier: to, code: recoveryCode, newPassword: `${PASSWORD} again` },
        { awayFrom: recovery.by },
      )
      expect(completed.status, 'recovery completed').to.equal(204)
      if (completed.by !== recovery.by) crossConfirmed.push(`recovery ${recovery.by} → ${completed.by}`)
    }

    /** `concurrency` people one after another each; the first failure stops the traffic and fails the next wait. */
    const people = (concurrency: number) =>
      Promise.all(
        Array.from({ length: concurrency }, async () => {
          try {
            while (traffic) await person()
          } catch (error) {
            traffic = false
            if (!abandoned) failure ??= error instanceof Error ? error : new Error(String(error))
          }
        }),
      )

    return {
      accepted,
      statuses,
      crossConfirmed,
      lost,
      upgradeDeadLetters,
      /** What every spawned process printed (JSON log lines: no secret). */
      outputs: () => spawned.map((child) => child.output()),
      async release(version: Version) {
        const step = run(version, 'release')
        expect(await step.exited, `${version} release step: ${step.output().slice(-2000)}`).to.equal(0)
      },
      async start(version: Version) {
        const worker = run(version, 'worker')
        await worker.waitFor(/"message":"worker started"/, `the ${version} worker to start`)
        const web = run(version, 'web')
        const [, url] = await web.waitFor(/"message":"web listening".*"url":"(http:\/\/[^"]+)"/, `the ${version} web to listen`)
        webs.push({ version, url: url!, process: web, inFlight: 0, serving: true })
        return worker
      },
      /** The router stops sending to the old web, which finishes what it holds; then both old processes get SIGTERM. */
      async stop(version: Version, worker: Spawned) {
        const old = webs.filter((web) => web.version === version)
        for (const web of old) web.serving = false
        await eventually(async () => old.every((web) => web.inFlight === 0) || undefined, 'the old web to finish its requests')
        for (const web of old) web.process.child.kill('SIGTERM')
        worker.child.kill('SIGTERM')
        await Promise.all([...old.map((web) => web.process.exited), worker.exited])
      },
      traffic: people,
      /** Lets every person finish, then throws what traffic met (a failed confirmation, say). */
      async stopTraffic(running: Promise<unknown>) {
        traffic = false
        await running
        if (failure) throw failure
      },
      /** Waits until `count` more codes were answered 202, by the given version's web if named. */
      async until(count: number, by?: Version) {
        const start = accepted.filter((entry) => !by || entry.by === by).length
        await eventually(
          async () => {
            if (failure) throw failure
            if (!lossesExpected) {
              const dead = await upgradeDeadLetters()
              if (dead.length > 0) throw new Error(`dead-lettered during the upgrade: ${dead.map((row) => row.reason).join(', ')}`)
            }
            return accepted.filter((entry) => !by || entry.by === by).length >= start + count ? true : undefined
          },
          `${count} more accepted codes`,
          90_000,
        )
      },
      /** Waits while both versions serve until a code of one version's web was confirmed on the other's. */
      async untilCrossConfirmed(kind: string) {
        await eventually(
          async () => {
            if (failure) throw failure
            return crossConfirmed.some((entry) => entry.startsWith(kind)) || undefined
          },
          `a ${kind} code confirmed on the other version's web`,
          90_000,
        )
      },
      async close() {
        traffic = false
        abandoned = true
        await stopAll(spawned)
      },
    }
  }

  it('delivers every accepted code exactly once, dead-letters nothing, answers no 5xx, and confirms codes across versions', async () => {
    const db = await emptyDatabase()
    const deploy = deployment(db)
    try {
      await deploy.release('previous')
      const oldWorker = await deploy.start('previous')
      const traffic = deploy.traffic(4)
      await deploy.until(4, 'previous')

      await deploy.release('current')
      await deploy.start('current')
      await deploy.until(8, 'current')
      // The overlap lasts until codes crossed both ways, however slow the machine.
      await deploy.untilCrossConfirmed('sign-up previous')
      await deploy.untilCrossConfirmed('sign-up current')
      await deploy.stop('previous', oldWorker)
      await deploy.until(4, 'current')
      await deploy.stopTraffic(traffic)

      // Drained: every message settled; nothing more will be sent.
      await eventually(
        async () =>
          (await db.owner('outbox.security_outbox_messages').whereNotIn('state', ['published', 'dead_lettered']).count({ n: '*' }))[0]
            ?.n === 0 || undefined,
        'every message settled',
        60_000,
      )
      const { accepted, statuses, crossConfirmed, lost } = deploy
      const deadLetters: { reason: string }[] = await db.owner('outbox.security_outbox_dead_letters').select('reason')
      // 0.1.0 hides a failed enqueue behind its 202 and logs it by error name and code.
      const hidden = deploy.outputs().flatMap((text) => text.split('\n').filter((line) => line.includes('not enqueued')))
      expect(hidden, 'enqueues the previous web hid behind a 202').to.deep.equal([])
      expect(lost, `codes accepted but never delivered (dead letters: ${deadLetters.map((row) => row.reason).join(', ')})`).to.deep.equal(
        [],
      )
      for (const to of new Set(accepted.map((entry) => entry.to))) {
        const emails = await inbox(emulator.url, to)
        expect(emails, `emails to one person`).to.have.length(accepted.filter((entry) => entry.to === to).length)
      }
      expect(await deploy.upgradeDeadLetters(), 'dead letters').to.deep.equal([])
      expect(statuses.filter(({ status }) => status >= 500)).to.deep.equal([])
      expect(accepted.filter((entry) => entry.by === 'previous').length).to.be.greaterThan(0)
      expect(
        crossConfirmed.filter((entry) => entry.startsWith('sign-up previous')).length,
        'old codes confirmed by the new web',
      ).to.be.greaterThan(0)
      expect(
        crossConfirmed.filter((entry) => entry.startsWith('sign-up current')).length,
        'new codes confirmed by the old web',
      ).to.be.greaterThan(0)
      const envelopes: { envelope: string }[] = await db.owner('outbox.security_outbox_ciphertexts').select('envelope')
      expect(envelopes, 'nothing left sealed').to.deep.equal([])
    } finally {
      await deploy.close()
      await db.drop()
    }
  })

  it('loses codes when the new web is made to seal v2 while the old worker still runs (ENVELOPE_VERSION=v2): what negotiation prevents', async () => {
    const db = await emptyDatabase()
    const deploy = deployment(db, { ENVELOPE_VERSION: 'v2' }, true)
    try {
      await deploy.release('previous')
      await deploy.start('previous')
      const traffic = deploy.traffic(4)
      await deploy.until(2, 'previous')
      await deploy.release('current')
      await deploy.start('current')
      const reasons = await eventually(
        async () => {
          const rows = await deploy.upgradeDeadLetters()
          return rows.length > 0 ? rows.map((row) => row.reason) : undefined
        },
        'the old worker to dead-letter a code the new web sealed',
        90_000,
      )
      expect(reasons).to.include('decryption_failed')
      await deploy.close()
      await traffic
    } finally {
      await deploy.close()
      await db.drop()
    }
  })
})
