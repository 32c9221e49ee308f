import { keysFromRings } from '../runtime/dev-keys.ts'
import { startWeb } from '../runtime/web.ts'
import { handleSignals } from '../runtime/signals.ts'
import { main, required } from './main.ts'

await main('web', async (config, logger) => {
  const signals = handleSignals(logger)
  const web = await startWeb({
    config,
    apiUrl: required(
      config.API_DATABASE_URL,
      'API_DATABASE_URL',
      'the web connects as a member of sealpost_api (use `npm start` for the all-in-one development mode)',
    ),
    keys: keysFromRings(
      required(config.OUTBOX_ENCRYPTION_KEYS, 'OUTBOX_ENCRYPTION_KEYS', 'is required by the web (or the single-key OUTBOX_ENCRYPTION_KEY)'),
      required(config.CODE_HASH_KEYS, 'CODE_HASH_KEYS', 'is required by the web (or the single-key CODE_HASH_KEY)'),
    ),
    logger,
  })
  signals.stopWith(web.stop)
  logger.info('web listening', { url: web.url })
})
