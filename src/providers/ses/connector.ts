import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2'
import { transportFault, TransportFailureError } from '../http.ts'
import { DeliveryFailureError, providerFault, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import { classifySesError } from './faults.ts'
import { sesRequestHandler } from './transport.ts'

export type SesSettings = {
  region: string
  fromAddress: string
  /** SES_FROM_NAME: the display name of the From header. */
  fromName?: string
  /** SES_CONFIGURATION_SET: named on every SendEmail, so its event destination publishes our events. */
  configurationSet?: string
  endpoint?: string
  credentials?: { accessKeyId: string; secretAccessKey: string }
  /** WORKER_CONCURRENCY: sends in flight at once, one connection each (the SDK's own default of 50 sockets would queue the rest). */
  concurrency?: number
}

/**
 * `"Name" <address>`: a display name of printable ASCII is quoted (its quotes and backslashes
 * escaped); any other is an RFC 2047 encoded word, so no name can break the header.
 */
export function fromHeader(address: string, name: string | undefined): string {
  if (!name) return address
  if (/^[\x20-\x7e]+$/.test(name)) return `"${name.replace(/["\\]/g, (char) => `\\${char}`)}" <${address}>`
  return `=?UTF-8?B?${Buffer.from(name, 'utf8').toString('base64')}?= <${address}>`
}

/** Email through SES v2 `SendEmail`, one provider request per attempt (SDK retries off); its answers map to the fault table in faults.ts. */
export function createSesConnector(settings: SesSettings): Provider & { close(): void } {
  const handler = sesRequestHandler(settings.concurrency)
  const client = new SESv2Client({
    region: settings.region,
    endpoint: settings.endpoint,
    credentials: settings.credentials,
    maxAttempts: 1,
    requestHandler: handler,
  })
  return {
    id: 'ses',
    channel: 'email',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      try {
        const result = await client.send(
          new SendEmailCommand({
            FromEmailAddress: fromHeader(settings.fromAddress, settings.fromName),
            ...(settings.configurationSet ? { ConfigurationSetName: settings.configurationSet } : {}),
            // Tag values allow letters, digits, _ - . @: a purpose name and a UUID qualify.
            EmailTags: [
              ...(message.purpose ? [{ Name: 'purpose', Value: message.purpose }] : []),
              { Name: 'message_id', Value: message.messageId },
            ],
            Destination: { ToAddresses: [message.destination] },
            Content: {
              Simple: {
                Subject: { Data: message.subject, Charset: 'UTF-8' },
                Body: {
                  Text: { Data: message.text, Charset: 'UTF-8' },
                  ...(message.html ? { Html: { Data: message.html, Charset: 'UTF-8' } } : {}),
                },
              },
            },
          }),
          { abortSignal: signal },
        )
        if (!result.MessageId) throw providerFault('indeterminate', 'MissingMessageId')
        return { providerMessageId: result.MessageId }
      } catch (error) {
        if (error instanceof TransportFailureError) throw transportFault(error)
        if (error instanceof DeliveryFailureError) throw error
        // The SDK checks the signal itself before a request goes out: nothing was written then. Once
        // SES has begun to answer, a bound reached while the SDK reads the body came after SES acted.
        if (signal.aborted) throw providerFault(handler.answered(signal) ? 'indeterminate' : 'unavailable', 'Timeout')
        const { fault, providerCode } = classifySesError(error, settings.fromAddress)
        const headers = (error as { $response?: { headers?: Record<string, string | undefined> } }).$response?.headers ?? {}
        const retryAt = fault === 'throttled' ? providerRetryAt({ retryAfter: headers['retry-after'] }, new Date()) : null
        throw providerFault(fault, providerCode, retryAt)
      }
    },
    close: () => client.destroy(),
  }
}
