import { createWasenderConnector } from '../src/delivery/wasender-connector.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { createTestDatabase } from './support/database.ts'
import { startFakeWasender } from './support/fake-wasender.ts'
import { capturingLogger, eventually, testKeys, uniquePhone, workerConfig } from './support/helpers.ts'
import { outboxHarness } from './support/outbox-harness.ts'
import { createLogger } from '../src/logging/logger.ts'

describe('probe', () => {
  it('measures', async function () {
    this.timeout(300_000)
    const db = await createTestDatabase()
    const keys = testKeys()
    const logs = capturingLogger()
    const harness = await outboxHarness(db, { keys, clock: () => new Date(), logger: logs.logger })
    const fake = await startFakeWasender('key')
    await harness.enqueueMany(Array.from({ length: 3000 }, () => uniquePhone()))
    const connector = createWasenderConnector({ apiUrl: fake.url, apiKey: 'key', logger: logs.logger })
    const t0 = Date.now()
    process.stdout.write('START\n')
    const worker = await startWorker({ config: workerConfig({ WORKER_CONCURRENCY: Number(process.env.WC ?? 16) }), workerUrl: db.workerUrl, keys, providers: [connector], logger: createLogger({ level: 'warn' }) })
    await eventually(async () => {
      const [r] = await db.owner('outbox.security_outbox_messages').where({ state: 'published' }).count({ n: '*' })
      return Number(r?.n) === 3000 ? true : undefined
    }, 'all', 200_000)
    process.stdout.write(`TOTAL ${Date.now() - t0} ms for 3000 => ${(3000 / ((Date.now() - t0) / 1000)).toFixed(0)}/s\n`)
    await worker.stop()
    await harness.close()
    await fake.stop()
    await db.drop()
  })
})
