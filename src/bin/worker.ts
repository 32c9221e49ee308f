// First: the heap's growth policy must be set before the worker's modules allocate.
import './worker-heap.ts'
import { providersFromConfig } from '../providers/wiring.ts'
import { handleSignals } from '../runtime/signals.ts'
import { startWorker } from '../runtime/worker.ts'
import { main, required } from './main.ts'

await main('worker', async (config, logger) => {
  const signals = handleSignals(logger)
  const providers = providersFromConfig(config)
  const worker = await startWorker({
    config,
    workerUrl: required(
      config.WORKER_DATABASE_URL,
      'WORKER_DATABASE_URL',
      'the worker connects as a member of sealpost_worker (use `npm start` for the all-in-one development mode)',
    ),
    keys: {
      outboxKey: required(
        config.OUTBOX_ENCRYPTION_KEYS,
        'OUTBOX_ENCRYPTION_KEYS',
        'is required by the worker (or the single-key OUTBOX_ENCRYPTION_KEY)',
      ),
    },
    providers,
    logger,
  })
  signals.stopWith(async () => {
    await worker.stop()
    providers.forEach((provider) => provider.close())
  })
})
