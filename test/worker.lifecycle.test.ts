import { expect } from 'chai'
import type { Provider } from '../src/providers/provider.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { eventually, uniquePhone, workerConfig } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { productionEnvironment, spawnWorker } from './support/processes.ts'

describe('worker lifecycle', () => {
  const f = useOutboxFixture()
  const rows = f.rows

  it('leaves a message whose result could not be recorded to pg-boss’s retry, which delivers it', async function () {
    this.timeout(30_000)
    const phone = uniquePhone()
    const { messageId } = await f.harness.enqueue(phone)
    let calls = 0
    const provider: Provider = {
      id: 'wasender',
      channel: 'whatsapp',
      async dispatch() {
        calls += 1
        // The database refuses the first record (as an outage or a bad deploy would); the second goes through.
        if (calls === 1) await f.db.owner.raw('REVOKE INSERT ON outbox.security_outbox_attempts FROM sealpost_worker')
        else await f.db.owner.raw('GRANT INSERT ON outbox.security_outbox_attempts TO sealpost_worker')
        return { providerMessageId: `sent-${calls}` }
      },
    }
    const worker = await startWorker({
      config: workerConfig({ WORKER_CONCURRENCY: 2, SEND_TIMEOUT_MS: 2_000 }),
      workerUrl: f.db.workerUrl,
      keys: f.keys,
      providers: [provider],
      logger: f.logs.logger,
    })
    try {
      await eventually(
        async () => ((await rows.message(messageId)).state === 'published' ? true : undefined),
        'the retried job to publish',
        20_000,
      )
    } finally {
      await worker.stop()
    }
    expect(calls).to.equal(2)
    expect((await rows.attempts(messageId)).map((row) => [row.attempt_no, row.provider_message_id])).to.deep.equal([[1, 'sent-2']])
    expect(f.logs.text()).to.include('delivery could not be recorded').and.to.include('"errorCode":"42501"')
    expect(f.logs.text()).not.to.include(phone)
  })

  it('finishes and records an in-flight send when SIGTERM arrives, then exits 0', async function () {
    this.timeout(30_000)
    const fake = await startFakeWasender('key')
    const emulator = await startSesEmulator(0)
    try {
      fake.behave(() => ({ kind: 'accept', delayMs: 1_500 }))
      const { messageId } = await f.harness.enqueue(uniquePhone())
      const worker = spawnWorker(
        productionEnvironment({
          apiUrl: f.db.apiUrl,
          workerUrl: f.db.workerUrl,
          keys: f.keys,
          sesEndpoint: emulator.url,
          wasenderUrl: fake.url,
          wasenderKey: 'key',
        }),
      )
      await eventually(async () => (fake.requests.length === 1 ? true : undefined), 'the send to start', 15_000)
      worker.child.kill('SIGTERM')
      expect(await worker.exited, worker.output()).to.equal(0)
      expect(await rows.message(messageId)).to.include({ state: 'published', attempt_count: 1 })
      expect(worker.output()).to.include('"message":"worker stopped"')
    } finally {
      await fake.stop()
      await emulator.stop()
    }
  })
})
