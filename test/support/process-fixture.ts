import { createBoss, installQueues } from '../../src/db/boss.ts'
import { startSesEmulator } from '../../src/providers/ses/emulator.ts'
import { registerChannelsAsWorker } from './channels.ts'
import { createTestDatabase, type TestDatabase } from './database.ts'
import { startFakeWasender } from '../../src/providers/wasender/fake.ts'
import { capturingLogger, testKeys } from './helpers.ts'
import { outboxHarness, type OutboxHarness } from './outbox-harness.ts'
import { procfileCommand, productionEnvironment, spawnCollecting, type Spawned, spawnWorker, stopAll } from './processes.ts'

export const FAKE_WASENDER_KEY = 'fixture-wasender-key'

/**
 * Registers before/after hooks for tests that run the Procfile processes: a test database, the SES
 * emulator, the fake Wasender, optionally the in-process enqueue harness and a short lease, and
 * the stopping of every process a test spawned. Read the fields inside tests.
 */
export function useProcessFixture(options: { harness?: boolean; leaseSeconds?: number } = {}) {
  let db: TestDatabase
  let emulator: Awaited<ReturnType<typeof startSesEmulator>>
  let wasender: Awaited<ReturnType<typeof startFakeWasender>>
  let harness: OutboxHarness | undefined
  const spawned: Spawned[] = []
  const keys = testKeys()
  const logs = capturingLogger()

  const fixture = {
    keys,
    logs,
    get db() {
      return db
    },
    get emulator() {
      return emulator
    },
    get wasender() {
      return wasender
    },
    get harness(): OutboxHarness {
      if (!harness) throw new Error('useProcessFixture({ harness: true }) for the harness')
      return harness
    },
    /** The production environment of the Procfile processes against this fixture. */
    env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
      return productionEnvironment({
        apiUrl: db.apiUrl,
        workerUrl: db.workerUrl,
        keys,
        sesEndpoint: emulator.url,
        wasenderUrl: wasender.url,
        wasenderKey: FAKE_WASENDER_KEY,
        extra,
      })
    },
    worker(extra: Record<string, string> = {}): Spawned {
      const worker = spawnWorker(fixture.env(extra))
      spawned.push(worker)
      return worker
    },
    web(extra: Record<string, string> = {}): Spawned {
      const web = spawnCollecting('sh', ['-c', procfileCommand('web')], { env: fixture.env(extra) })
      spawned.push(web)
      return web
    },
  }

  before(async function () {
    this.timeout(120_000)
    db = await createTestDatabase()
    // The channels this fixture's workers offer (SES and Wasender), registered as a worker would: a web spawned first offers them too.
    await registerChannelsAsWorker(db.owner, ['email', 'whatsapp'])
    if (options.leaseSeconds) {
      // A short lease, as the release step would set it from LEASE_SECONDS, so a test waits seconds.
      const owner = createBoss(db.ownerUrl, 'release', logs.logger)
      await owner.start()
      await installQueues(owner, { LEASE_SECONDS: options.leaseSeconds })
      await owner.stop({ graceful: false })
    }
    emulator = await startSesEmulator(0)
    wasender = await startFakeWasender(FAKE_WASENDER_KEY)
    if (options.harness) harness = await outboxHarness(db, { keys, clock: () => new Date(), logger: logs.logger })
  })
  after(async () => {
    await stopAll(spawned)
    await harness?.close()
    await wasender?.stop()
    await emulator?.stop()
    await db?.drop()
  })
  return fixture
}
