import type { Config } from '../../config/schema.ts'
import type { Provider } from '../delivery/provider.ts'
import { createSesConnector } from '../delivery/ses-connector.ts'

const DEV_FROM_ADDRESS = 'no-reply@sealpost.test'

/**
 * Connectors from configuration. Outside development the SES settings are required (config
 * refuses to start without them); in development email goes to the local SES emulator.
 */
export function providersFromConfig(
  config: Pick<Config, 'NODE_ENV' | 'SES_REGION' | 'SES_FROM_ADDRESS' | 'SES_ENDPOINT' | 'SES_EMULATOR_PORT'>,
  emulatorEndpoint?: string,
): (Provider & { close(): void })[] {
  const local = config.NODE_ENV === 'development' || config.NODE_ENV === 'test'
  const endpoint = config.SES_ENDPOINT ?? (local ? emulatorEndpoint ?? `http://127.0.0.1:${config.SES_EMULATOR_PORT}` : undefined)
  const ses = createSesConnector({
    region: config.SES_REGION ?? 'us-east-1',
    fromAddress: config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
    endpoint,
    // The emulator accepts any credentials; real SES uses the default AWS credential chain.
    credentials: local && !config.SES_REGION ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined,
  })
  return [ses]
}
