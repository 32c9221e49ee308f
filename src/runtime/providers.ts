import type { Config } from '../../config/schema.ts'
import type { Provider } from '../delivery/provider.ts'
import { createSesConnector } from '../delivery/ses-connector.ts'
import { createWasenderConnector } from '../delivery/wasender-connector.ts'
import type { Logger } from '../logging/logger.ts'

const DEV_FROM_ADDRESS = 'no-reply@sealpost.test'

/**
 * Connectors from configuration. Outside development the SES and Wasender settings are required
 * (config refuses to start without them); in development email goes to the local SES emulator and
 * WhatsApp is off unless configured (the worker warns at startup).
 */
export function providersFromConfig(
  config: Pick<
    Config,
    'NODE_ENV' | 'SES_REGION' | 'SES_FROM_ADDRESS' | 'SES_ENDPOINT' | 'SES_EMULATOR_PORT' | 'WASENDER_API_URL' | 'WASENDER_API_KEY'
  > &
    Partial<Pick<Config, 'SES_CONFIGURATION_SET' | 'SES_FROM_NAME' | 'PRODUCT_NAME' | 'WORKER_CONCURRENCY'>>,
  logger: Logger,
  emulatorEndpoint?: string,
): (Provider & { close(): void })[] {
  const local = config.NODE_ENV === 'development' || config.NODE_ENV === 'test'
  const endpoint = config.SES_ENDPOINT ?? (local ? (emulatorEndpoint ?? `http://127.0.0.1:${config.SES_EMULATOR_PORT}`) : undefined)
  const ses = createSesConnector({
    region: config.SES_REGION ?? 'us-east-1',
    fromAddress: config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
    fromName: config.SES_FROM_NAME ?? config.PRODUCT_NAME,
    configurationSet: config.SES_CONFIGURATION_SET,
    endpoint,
    // The emulator accepts any credentials; real SES uses the default AWS credential chain.
    credentials: local && !config.SES_REGION ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined,
    concurrency: config.WORKER_CONCURRENCY,
  })
  const whatsapp =
    config.WASENDER_API_URL && config.WASENDER_API_KEY
      ? [
          createWasenderConnector({
            apiUrl: config.WASENDER_API_URL,
            apiKey: config.WASENDER_API_KEY,
            logger,
            concurrency: config.WORKER_CONCURRENCY,
          }),
        ]
      : []
  return [ses, ...whatsapp]
}
