import { defineProvider } from '../definition.ts'
import { DEV_FROM_ADDRESS } from '../ses/settings.ts'
import { createSmtpConnector } from './connector.ts'
import { FAULT_ANSWERS } from './faults.ts'
import { smtpPlainAllowed, smtpSettings } from './settings.ts'

/** Email through an SMTP relay (docs/deliverability.md "Choosing an SMTP relay"); it has no webhook: a relay reports nothing back. */
export const smtp = defineProvider({
  id: 'smtp',
  channel: 'email',
  title: 'SMTP relay',
  settings: smtpSettings,
  configured: (config) => config.SMTP_URL !== undefined,
  fromConfig(config) {
    // loadConfig refuses a worker whose EMAIL_PROVIDERS lists smtp without SMTP_URL; this is its second line.
    if (!config.SMTP_URL) throw new Error('SMTP_URL is required when EMAIL_PROVIDERS lists smtp')
    return createSmtpConnector({
      url: config.SMTP_URL,
      fromAddress: config.SMTP_FROM_ADDRESS ?? config.SES_FROM_ADDRESS ?? DEV_FROM_ADDRESS,
      fromName: config.SES_FROM_NAME ?? config.PRODUCT_NAME,
      timeoutMs: config.SEND_TIMEOUT_MS,
      concurrency: config.WORKER_CONCURRENCY,
      allowPlain: smtpPlainAllowed(config),
    })
  },
  faultAnswers: FAULT_ANSWERS,
})
