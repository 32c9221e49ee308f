import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import type { Knex } from 'knex'
import pg from 'pg'
import { createKnex } from '../../src/db/knex.ts'
import { asLogin } from './cluster.ts'
import { eventually, inbox, uniqueEmail, type StoredEmail } from './helpers.ts'
import type { PreviousRelease } from './previous-release.ts'
import { bareEnvironment, procfileCommand, spawnCollecting, stopAll, type Spawned } from './processes.ts'
import { testCluster } from './root-hooks.ts'

/**
 * One deployment during a rolling upgrade (docs/upgrading.md "The upgrade test"): a database, the
 * previous release's and this release's processes from their own trees, and people signing up and
 * recovering passwords through a router in front of whichever webs serve.
 */

export type Version = 'previous' | 'current'
type Web = { version: Version; url: string; process: Spawned; inFlight: number; serving: boolean }
type Accepted = { to: string; purpose: 'sign_up' | 'password_recovery'; by: Version }
export type Outside = { previous: PreviousRelease; sesUrl: string; wasenderUrl: string; wasenderKey: string }

const PASSWORD = 'correct horse battery staple upgrade'

/** Same keys for both versions, as an operator keeps them (the single-key form both read). */
const keys = { outbox: randomBytes(32).toString('base64'), codeHash: randomBytes(32).toString('base64') }

/** One empty database (no migration: the previous release's release step builds it) and its owner pool. */
export async function emptyDatabase() {
  const cluster = testCluster()
  const name = `sealpost_upgrade_${randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: cluster.ownerUrl('postgres') })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.end())
  const ownerUrl = cluster.ownerUrl(name)
  const owner: Knex = createKnex(ownerUrl, { applicationName: 'sealpost-test-owner', max: 2 })
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
export type UpgradeDatabase = Awaited<ReturnType<typeof emptyDatabase>>

export function rollingDeployment(outside: Outside, db: UpgradeDatabase) {
  const { previous } = outside
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

  // The previous release's minimal production settings, which this release starts with too (CHANGELOG).
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
      SES_ENDPOINT: outside.sesUrl,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      WASENDER_API_URL: outside.wasenderUrl,
      WASENDER_API_KEY: outside.wasenderKey,
      // Every request of this test comes from one address.
      CLIENT_RATE_LIMIT_PER_MINUTE: '100000',
      INVITATION_LINK_BASE_URL: 'https://app.sealpost.test',
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
  async function call(route: string, body: unknown, awayFrom?: Version): Promise<{ status: number; by: Version }> {
    const serving = webs.filter((web) => web.serving)
    const other = serving.filter((web) => awayFrom !== undefined && web.version !== awayFrom)
    const choices = other.length > 0 ? other : serving
    const web = choices[turn++ % choices.length]!
    web.inFlight += 1
    try {
      const response = await fetch(`${web.url}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      await response.arrayBuffer()
      statuses.push({ status: response.status, route, by: web.version })
      return { status: response.status, by: web.version }
    } finally {
      web.inFlight -= 1
    }
  }

  /**
   * The code of the `nth` email to `to`, once the emulator has it; undefined if it never comes.
   * An email without a code fails the traffic: each version's templates put it on a line of its own.
   */
  async function codeFor(to: string, nth: number, by: Version): Promise<string | undefined> {
    let email: StoredEmail
    try {
      email = await eventually(
        async () => {
          if (abandoned) throw new Error('abandoned')
          return (await inbox(outside.sesUrl, to))[nth]
        },
        `email ${nth + 1} to a person`,
        60_000,
      )
    } catch (error) {
      const messages: { state: string }[] = await db.owner('outbox.security_outbox_messages').where({ destination: to }).select('state')
      lost.push(
        `${(error as Error).message} (answered by the ${by} web; messages: ${messages.map((row) => row.state).join(', ') || 'none'})`,
      )
      return undefined
    }
    const code = /^\s*(\d{6})\s*$/m.exec(email.body.text ?? '')?.[1]
    if (code === undefined) throw new Error(`email ${nth + 1} to a person (answered by the ${by} web) carries no code on a line of its own`)
    return code
  }

  /** A person signs up on one web and confirms on the next, then recovers the password the same way. */
  async function person(): Promise<void> {
    const to = uniqueEmail('upgrade')
    const signUp = await call('/sign-ups', { identifier: to, password: PASSWORD })
    if (signUp.status !== 202) return
    accepted.push({ to, purpose: 'sign_up', by: signUp.by })
    const code = await codeFor(to, 0, signUp.by)
    if (!code) return
    const confirmed = await call('/sign-ups/confirmation', { identifier: to, code, password: PASSWORD }, signUp.by)
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
      recovery.by,
    )
    expect(completed.status, 'recovery completed').to.equal(204)
    if (completed.by !== recovery.by) crossConfirmed.push(`recovery ${recovery.by} → ${completed.by}`)
  }

  /** What the traffic met so far, for a timeout's message: answers per version, route and status, codes lost. */
  const summary = () => {
    const counts = new Map<string, number>()
    for (const { by, route, status } of statuses) counts.set(`${by} ${route} ${status}`, (counts.get(`${by} ${route} ${status}`) ?? 0) + 1)
    return `answers: ${[...counts].map(([key, n]) => `${key} ×${n}`).join('; ')}; crossed: ${crossConfirmed.length}; lost: ${lost.join('; ') || 'none'}`
  }
  /** Waits as `eventually` does, failing at once on what the traffic met; a timeout says what that was. */
  const waitFor = async <T>(probe: () => Promise<T | undefined>, what: string): Promise<T> => {
    try {
      return await eventually(
        async () => {
          if (failure) throw failure
          const dead = await upgradeDeadLetters()
          if (dead.length > 0) throw new Error(`dead-lettered during the upgrade: ${dead.map((row) => row.reason).join(', ')}`)
          return await probe()
        },
        what,
        90_000,
      )
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('timed out')) error.message += ` (${summary()})`
      throw error
    }
  }

  return {
    accepted,
    statuses,
    crossConfirmed,
    lost,
    upgradeDeadLetters,
    /** What every spawned process printed (JSON log lines: no secret). */
    outputs: () => spawned.map((child) => child.output()),
    /** Runs a version's release step to its end: its exit code and what it printed. */
    async releaseStep(version: Version): Promise<{ code: number | null; output: string }> {
      const step = run(version, 'release')
      return { code: await step.exited, output: step.output() }
    },
    async release(version: Version) {
      const { code, output } = await this.releaseStep(version)
      expect(code, `${version} release step: ${output.slice(-2000)}`).to.equal(0)
    },
    /** Starts a worker, then a web the router sends to; the worker, to stop later. */
    async start(version: Version): Promise<Spawned> {
      const worker = run(version, 'worker')
      await worker.waitFor(/"message":"worker started"/, `the ${version} worker to start`)
      const web = run(version, 'web')
      const [, url] = await web.waitFor(/"message":"web listening".*"url":"(http:\/\/[^"]+)"/, `the ${version} web to listen`)
      webs.push({ version, url: url!, process: web, inFlight: 0, serving: true })
      return worker
    },
    /** The router stops sending to the version's webs, which finish what they hold; then they and `worker` get SIGTERM. */
    async stop(version: Version, worker: Spawned) {
      const old = webs.filter((web) => web.version === version && web.serving)
      for (const web of old) web.serving = false
      await eventually(async () => old.every((web) => web.inFlight === 0) || undefined, `the ${version} web to finish its requests`)
      for (const web of old) web.process.child.kill('SIGTERM')
      worker.child.kill('SIGTERM')
      await Promise.all([...old.map((web) => web.process.exited), worker.exited])
    },
    /** `concurrency` people one after another each; the first failure stops the traffic and fails the next wait. */
    traffic: (concurrency: number) =>
      Promise.all(
        Array.from({ length: concurrency }, async () => {
          try {
            while (traffic) await person()
          } catch (error) {
            traffic = false
            if (!abandoned) failure ??= error instanceof Error ? error : new Error(String(error))
          }
        }),
      ),
    /** Lets every person finish, then throws what traffic met (a failed confirmation, say). */
    async stopTraffic(running: Promise<unknown>) {
      traffic = false
      await running
      if (failure) throw failure
    },
    /** Waits until `count` more codes were answered 202, by the given version's web if named. */
    async until(count: number, by?: Version) {
      const answered = () => accepted.filter((entry) => !by || entry.by === by).length
      const start = answered()
      await waitFor(async () => (answered() >= start + count ? true : undefined), `${count} more accepted codes`)
    },
    /** Waits while both versions serve until a code of one version's web was confirmed on the other's. */
    async untilCrossConfirmed(kind: string) {
      await waitFor(
        async () => crossConfirmed.some((entry) => entry.startsWith(kind)) || undefined,
        `a ${kind} code confirmed on the other version's web`,
      )
    },
    async close() {
      traffic = false
      abandoned = true
      await stopAll(spawned)
    },
  }
}
export type RollingDeployment = ReturnType<typeof rollingDeployment>
