import { startWeb } from '../runtime/web.ts'
import { handleSignals } from '../runtime/signals.ts'
import { main, required } from './main.ts'

await main('web', async (config, logger) => {
  const signals = handleSignals(logger)
  const web = await startWeb({
    config,
    apiUrl: required(config.API_DATABASE_URL, 'API_DATABASE_URL', 'the web connects as a member of sealpost_api (use `npm start` for the all-in-one development mode)'),
    keys: {
      outboxKey: required(config.OUTBOX_ENCRYPTION_KEY, 'OUTBOX_ENCRYPTION_KEY', 'is required by the web'),
      codeHashKey: required(config.CODE_HASH_KEY, 'CODE_HASH_KEY', 'is required by the web'),
    },
    logger,
  })
  signals.stopWith(web.stop)
  logger.info('web listening', { url: web.url })
})
