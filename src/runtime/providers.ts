import { publicBaseUrl, smtpPlainAllowed, twilioConfigured, type Config, type EmailProviderId } from '../../config/schema.ts'
import type { Provider } from '../providers/provider.ts'
import { createSesConnector } from '../providers/ses/connector.ts'
import { createSmtpConnector } from '../providers/smtp/connector.ts'
import { createTwilioConnector } from '../providers/twilio/connector.ts'
import { twilioStatusCallbackUrl } from '../providers/twilio/signature.ts'
import { createWasenderConnector } from '../providers/wasender/connector.ts'
import { createWhatsAppCloudConnector } from '../providers/whatsapp-cloud/connector.ts'
import { WHATSAPP_CLOUD_DEFAULT_API_URL, WHATSAPP_CLOUD_DEFAULT_LANGUAGES, whatsAppProvider } from '../../config/whatsapp-cloud.ts'

const DEV_FROM_ADDRESS = 'no-reply@sealpost.test'

type Connector = Provider & { close(): void }

/**
 * Connectors from configuration: the email providers in EMAIL_PROVIDERS order, then the WhatsApp
 * provider WHATSAPP_PROVIDER names (the Cloud API or Wasender; default: the configured one), then
 * Twilio for SMS when TWILIO_* is set.
 * Within a channel the order is the order providers are tried. Outside development the settings
 * of each listed provider are required (config refuses to start without them); in development
 * SES goes to the local SES emulator and WhatsApp is off unless configured (the worker warns at
 * startup).
 */
export function providersFromConfig(
  config: Pick<
    Config,
    | 'NODE_ENV'
    | 'SES_REGION'
    | 'SES_FROM_ADDRESS'
    | 'SES_ENDPOINT'
    | 'SES_EMULATOR_PORT'
    | 'WASENDER_API_URL'
    | 'WASENDER_API_KEY'
    | 'EMAIL_PROVIDERS'
    | 'SMTP_URL'
    | 'SMTP_FROM_ADDRESS'
    | 'SEND_TIMEOUT_MS'
  > &
    Partial<Pick<Config, 'SES_CONFIGURATION_SET' | 'SES_FROM_NAME' | 'PRODUCT_NAME' | 'WORKER_CONCURRENCY' | 'PORT'>> &
    Partial<
      Pick<
        Config,
        | 'WHATSAPP_PROVIDER'
        | 'WHATSAPP_CLOUD_API_URL'
        | 'WHATSAPP_CLOUD_ACCESS_TOKEN'
        | 'WHATSAPP_CLOUD_PHONE_NUMBER_ID'
        | 'WHATSAPP_CLOUD_TEMPLATE'
        | 'WHATSAPP_CLOUD_TEMPLATE_LANGUAGES'
      >
    > &
    Partial<Pick<Config, 'TWILIO_ACCOUNT_SID' | 'TWILIO_AUTH_TOKEN' | 'TWILIO_API_KEY_SID' | 'TWILIO_API_KEY_SECRET'>> &
    Partial<Pick<Config, 'TWILIO_MESSAGING_SERVICE_SID' | 'TWILIO_FROM_NUMBER' | 'TWILIO_API_URL' | 'PUBLIC_BASE_URL'>>,
  emulatorEndpoint?: string,
): Connector[] {
  const local = config.NODE_ENV === 'development' || config.NODE_ENV === 'test'
  const fromName = config.SES_FROM_NAME ?? config.PRODUCT_NAME
  const build: Record<EmailProviderId, () => Connector> = {
    ses: () =>
      createSesConnector({
        region: config.SES_REGION ?? 'us-east-1',
        fromAddress: config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
        fromName,
        configurationSet: config.SES_CONFIGURATION_SET,
        endpoint: config.SES_ENDPOINT ?? (local ? (emulatorEndpoint ?? `http://127.0.0.1:${config.SES_EMULATOR_PORT}`) : undefined),
        // The emulator accepts any credentials; real SES uses the default AWS credential chain.
        credentials: local && !config.SES_REGION ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined,
        concurrency: config.WORKER_CONCURRENCY,
      }),
    smtp: () => {
      // loadConfig refuses a worker whose EMAIL_PROVIDERS lists smtp without SMTP_URL; this is its second line.
      if (!config.SMTP_URL) throw new Error('SMTP_URL is required when EMAIL_PROVIDERS lists smtp')
      return createSmtpConnector({
        url: config.SMTP_URL,
        fromAddress: config.SMTP_FROM_ADDRESS ?? config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
        fromName,
        timeoutMs: config.SEND_TIMEOUT_MS,
        concurrency: config.WORKER_CONCURRENCY,
        allowPlain: smtpPlainAllowed(config),
      })
    },
  }
  const email = config.EMAIL_PROVIDERS.map((id) => build[id]())
  // One WhatsApp provider: WHATSAPP_PROVIDER, else the configured one (loadConfig refused an ambiguous or half setting).
  const provider = whatsAppProvider(config)
  const whatsapp: Connector[] = []
  if (provider === 'wasender' && config.WASENDER_API_URL && config.WASENDER_API_KEY)
    whatsapp.push(
      createWasenderConnector({
        apiUrl: config.WASENDER_API_URL,
        apiKey: config.WASENDER_API_KEY,
        concurrency: config.WORKER_CONCURRENCY,
      }),
    )
  if (provider === 'cloud' && config.WHATSAPP_CLOUD_ACCESS_TOKEN && config.WHATSAPP_CLOUD_PHONE_NUMBER_ID && config.WHATSAPP_CLOUD_TEMPLATE)
    whatsapp.push(
      createWhatsAppCloudConnector({
        apiUrl: config.WHATSAPP_CLOUD_API_URL ?? WHATSAPP_CLOUD_DEFAULT_API_URL,
        accessToken: config.WHATSAPP_CLOUD_ACCESS_TOKEN,
        phoneNumberId: config.WHATSAPP_CLOUD_PHONE_NUMBER_ID,
        template: config.WHATSAPP_CLOUD_TEMPLATE,
        languages: config.WHATSAPP_CLOUD_TEMPLATE_LANGUAGES ?? WHATSAPP_CLOUD_DEFAULT_LANGUAGES,
        concurrency: config.WORKER_CONCURRENCY,
      }),
    )
  return [...email, ...whatsapp, ...(twilioConfigured(config) ? [twilioFromConfig(config)] : [])]
}

/** The Twilio connector of a complete TWILIO_* set (loadConfig refuses half of one). */
function twilioFromConfig(config: Parameters<typeof providersFromConfig>[0]): Connector {
  const { TWILIO_ACCOUNT_SID: accountSid, TWILIO_AUTH_TOKEN: authToken } = config
  if (!accountSid || !authToken) throw new Error('TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are required when any TWILIO_* is set')
  const apiKey =
    config.TWILIO_API_KEY_SID && config.TWILIO_API_KEY_SECRET
      ? { username: config.TWILIO_API_KEY_SID, password: config.TWILIO_API_KEY_SECRET }
      : undefined
  return createTwilioConnector({
    apiUrl: config.TWILIO_API_URL ?? 'https://api.twilio.com',
    accountSid,
    credentials: apiKey ?? { username: accountSid, password: authToken },
    sender: config.TWILIO_MESSAGING_SERVICE_SID
      ? { messagingServiceSid: config.TWILIO_MESSAGING_SERVICE_SID }
      : { from: config.TWILIO_FROM_NUMBER ?? '' },
    statusCallbackUrl: twilioStatusCallbackUrl(
      publicBaseUrl({ NODE_ENV: config.NODE_ENV, PORT: config.PORT ?? 3000, PUBLIC_BASE_URL: config.PUBLIC_BASE_URL }),
    ),
    concurrency: config.WORKER_CONCURRENCY,
  })
}
