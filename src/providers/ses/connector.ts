import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2'
import { DeliveryFailureError, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import type { FailureClass } from '../../outbox/constants.ts'

const REJECTED_NAMES = new Set([
  'BadRequestException',
  'MessageRejected',
  'NotFoundException',
  'MailFromDomainNotVerifiedException',
  'AccountSuspendedException',
  'SendingPausedException',
])
const THROTTLED_NAMES = new Set(['TooManyRequestsException', 'LimitExceededException', 'ThrottlingException'])
const ABORTED_NAMES = new Set(['AbortError', 'TimeoutError', 'RequestTimeout'])
const REFUSED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN'])

/** Maps an SES SDK error to our taxonomy (docs/architecture.md §4, step 5): pure, table-tested. */
export function classifySesError(error: unknown): { failureClass: FailureClass; providerCode: string } {
  const { name, code, $metadata } = (error ?? {}) as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } }
  const status = $metadata?.httpStatusCode
  const providerCode = name ?? code ?? 'unknown'
  if (name && ABORTED_NAMES.has(name)) return { failureClass: 'INDETERMINATE', providerCode }
  if (name && THROTTLED_NAMES.has(name)) return { failureClass: 'THROTTLED', providerCode }
  if (name && REJECTED_NAMES.has(name)) {
    // Account-level refusals are ours to fix, not the destination's fault.
    const accountLevel =
      name === 'MailFromDomainNotVerifiedException' || name === 'AccountSuspendedException' || name === 'SendingPausedException'
    return { failureClass: accountLevel ? 'UNAVAILABLE' : 'REJECTED', providerCode }
  }
  if (code && REFUSED_CODES.has(code)) return { failureClass: 'UNAVAILABLE', providerCode }
  if (status === 429) return { failureClass: 'THROTTLED', providerCode }
  if (status === 401 || status === 403) return { failureClass: 'UNAVAILABLE', providerCode }
  if (status === 400 || status === 404 || status === 422) return { failureClass: 'REJECTED', providerCode }
  if (status === 500 || status === 502 || status === 503) return { failureClass: 'UNAVAILABLE', providerCode }
  return { failureClass: 'INDETERMINATE', providerCode }
}

export type SesSettings = {
  region: string
  fromAddress: string
  /** SES_FROM_NAME: the display name of the From header. */
  fromName?: string
  /** SES_CONFIGURATION_SET: named on every SendEmail, so its event destination publishes our events. */
  configurationSet?: string
  endpoint?: string
  credentials?: { accessKeyId: string; secretAccessKey: string }
  /** WORKER_CONCURRENCY: sends in flight at once; the SDK's own default of 50 sockets would queue the rest. */
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

/** Email through SES v2 `SendEmail`, one provider request per attempt (SDK retries off). */
export function createSesConnector(settings: SesSettings): Provider & { close(): void } {
  const sockets = Math.max(64, settings.concurrency ?? 0)
  const client = new SESv2Client({
    region: settings.region,
    endpoint: settings.endpoint,
    credentials: settings.credentials,
    maxAttempts: 1,
    // One socket per send slot (as the Wasender connector has), so no send waits for a socket and
    // spends its SEND_TIMEOUT_MS queued inside the SDK.
    requestHandler: { httpAgent: { maxSockets: sockets }, httpsAgent: { maxSockets: sockets } },
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
        if (!result.MessageId) throw new DeliveryFailureError('INDETERMINATE', 'MissingMessageId')
        return { providerMessageId: result.MessageId }
      } catch (error) {
        if (error instanceof DeliveryFailureError) throw error
        if (signal.aborted) throw new DeliveryFailureError('INDETERMINATE', 'Timeout')
        const { failureClass, providerCode } = classifySesError(error)
        const headers = (error as { $response?: { headers?: Record<string, string | undefined> } }).$response?.headers ?? {}
        const retryAt = failureClass === 'THROTTLED' ? providerRetryAt({ retryAfter: headers['retry-after'] }, new Date()) : null
        throw new DeliveryFailureError(failureClass, providerCode, retryAt)
      }
    },
    close: () => client.destroy(),
  }
}
