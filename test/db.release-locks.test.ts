import { expect } from 'chai'
import type { Knex } from 'knex'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { release } from '../src/db/release.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail, workerConfig } from './support/helpers.ts'
import { webChallengeDeps } from './support/web-side.ts'
import { createKnex } from '../src/db/knex.ts'
import { createBoss } from '../src/db/boss.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { emulatorSesConnector } from './support/web-stack.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { registerChannelsAsWorker } from './support/channels.ts'

/**
 * "the release step deadlocks with live traffic". Every release re-applied row-level
 * security on pgboss.job and each partition (ALTER TABLE … ENABLE ROW LEVEL SECURITY, DROP/CREATE
 * POLICY: AccessExclusiveLock) while pg-boss's statements lock partition then parent; on Heroku
 * every `config:set` runs the release step. A release with nothing to change must take no strong
 * lock there, and one that must lock must not fail the deploy because traffic is flowing.
 */
describe('the release step beside live traffic', () => {
  let db: TestDatabase
  const logs = capturingLogger()

  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })

  /** The locks the release's connections hold or wait for on pgboss.job and its partitions, sampled until `done`. */
  async function strongJobLocksDuring(work: Promise<unknown>, watcher: Knex): Promise<string[]> {
    const seen = new Set<string>()
    let finished = false
    const watched = work.finally(() => (finished = true))
    while (!finished) {
      const { rows } = await watcher.raw<{ rows: { lock: string }[] }>(
        `SELECT l.relation::regclass::text || ' ' || l.mode || CASE WHEN l.granted THEN '' ELSE ' (waiting)' END AS lock
           FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE a.application_name = 'sealpost-release' AND l.locktype = 'relation'
            AND l.mode IN ('AccessExclusiveLock', 'ExclusiveLock', 'ShareRowExclusiveLock', 'ShareLock')
            AND (l.relation = 'pgboss.job'::regclass
                 OR l.relation IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass))`,
      )
      for (const row of rows) seen.add(row.lock)
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    await watched
    return [...seen]
  }

  it('a release with nothing to change takes no strong lock on pgboss.job: it completes while a worker reads the job table', async () => {
    const watcher = createKnex(db.ownerUrl, { applicationName: 'sealpost-test-watcher', max: 1 })
    // An open transaction that read the job table (a fetch in flight, a long report) holds AccessShareLock on it.
    const reader = await db.owner.transaction()
    try {
      await reader.raw('LOCK TABLE pgboss.job IN ACCESS SHARE MODE')
      const releasing = release(db.ownerUrl, { LEASE_SECONDS: 60 }, logs.logger)
      const bounded = Promise.race([
        releasing.then(() => 'released'),
        new Promise((resolve) => setTimeout(() => resolve('still waiting'), 15_000)),
      ])
      const locks = await strongJobLocksDuring(bounded, watcher)
      expect(locks, 'strong locks the release took on the job table').to.deep.equal([])
      expect(await bounded).to.equal('released')
    } finally {
      await reader.rollback()
      await watcher.destroy()
    }
  })

  /** Policies written by a release that did not mark them (or for other roles): the next release re-creates them. */
  async function forgetPolicyMarks(): Promise<void> {
    const { rows } = await db.owner.raw<{ rows: { policy: string; relation: string }[] }>(
      `SELECT polname AS policy, polrelid::regclass::text AS relation FROM pg_policy
        WHERE polrelid = 'pgboss.job'::regclass OR polrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass)`,
    )
    // One relation per statement: this connection never holds one partition's lock while waiting for another's.
    for (const { policy, relation } of rows) await db.owner.raw(`COMMENT ON POLICY ${policy} ON ${relation} IS NULL`)
  }

  it('releases again and again while recoveries are enqueued and a worker delivers: every release succeeds, no request fails', async function () {
    this.timeout(120_000)
    const keys = testKeys()
    const emulator = await startSesEmulator(0)
    await registerChannelsAsWorker(db.owner, ['email'])
    const worker = await startWorker({
      config: workerConfig({}),
      workerUrl: db.workerUrl,
      keys,
      providers: [emulatorSesConnector(emulator.url)],
      logger: logs.logger,
    })
    const api = createKnex(db.apiUrl, { applicationName: 'sealpost-test-web', max: 4 })
    const boss = createBoss(db.apiUrl, 'web', logs.logger)
    await boss.start()
    const addresses = await Promise.all(
      [1, 2, 3, 4].map(async () => {
        const address = uniqueEmail('traffic')
        await createVerifiedIdentity(db.owner, address)
        return address
      }),
    )
    const failures: string[] = []
    let requests = 0
    let flowing = true
    const traffic = addresses.map(async (address) => {
      const deps = webChallengeDeps(boss, keys, logs.logger)
      while (flowing) {
        requests++
        // A fresh clock each time: every request a new challenge (a resend after 30 s), never refused as too soon.
        const at = new Date(Date.now() + requests * 60_000)
        await requestPasswordRecovery(api, { ...deps, clock: () => at }, { kind: 'email', value: address }).catch((error: unknown) =>
          failures.push(String((error as { code?: string }).code ?? (error as Error).name)),
        )
      }
    })
    try {
      for (let round = 0; round < 4; round++) {
        // Every other round has row security to re-apply, as the first release after an upgrade has.
        if (round % 2 === 0) await forgetPolicyMarks()
        await release(db.ownerUrl, { LEASE_SECONDS: 60 }, logs.logger)
      }
    } finally {
      flowing = false
      await Promise.all(traffic)
      await boss.stop({ graceful: false })
      await api.destroy()
      await worker.stop()
      await emulator.stop()
    }
    expect(requests, 'traffic flowed during the releases').to.be.greaterThan(8)
    expect(failures, 'requests that failed').to.deep.equal([])
    expect(logs.text(), 'the releases re-applied row security').to.include('release: row security applied')
  })
})
