import { headerOf, jsonOf, providerAgent, sendProviderRequest, transportFault, TransportFailureError } from '../http.ts'
import { providerFault, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import { classifyTwilioAnswer } from './faults.ts'

export type TwilioSettings = {
  apiUrl: string
  accountSid: string
  /** Basic auth: the account SID and auth token, or an API key's SID and secret when given. */
  credentials: { username: string; password: string }
  /** Exactly one: a Messaging Service (Twilio picks the sender) or a From number. */
  sender: { messagingServiceSid: string } | { from: string }
  /** Where Twilio posts this message's status callbacks (signature.ts). */
  statusCallbackUrl: string
  clock?: () => Date
  /** Sends in flight at most (WORKER_CONCURRENCY): one connection each, so no send queues for a socket. */
  concurrency?: number
}

/**
 * SMS through Twilio's Programmable Messaging API: `POST /2010-04-01/Accounts/{sid}/Messages.json`,
 * form-encoded `To`, `Body`, the sender and `StatusCallback`; accepted on a 2xx whose JSON holds
 * the message `sid`. Its answers map to the fault table in faults.ts; Twilio's error text is never
 * copied anywhere (it echoes the number): a failure carries its code only.
 */
export function createTwilioConnector(settings: TwilioSettings): Provider & { close(): void } {
  const agent = providerAgent(settings.concurrency)
  const endpoint = new URL(`/2010-04-01/Accounts/${encodeURIComponent(settings.accountSid)}/Messages.json`, settings.apiUrl).toString()
  const authorization = `Basic ${Buffer.from(`${settings.credentials.username}:${settings.credentials.password}`).toString('base64')}`
  const sender: [string, string] =
    'messagingServiceSid' in settings.sender ? ['MessagingServiceSid', settings.sender.messagingServiceSid] : ['From', settings.sender.from]
  const clock = settings.clock ?? (() => new Date())
  return {
    id: 'twilio',
    channel: 'sms',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      const body = new URLSearchParams([
        ['To', message.destination],
        ['Body', message.text],
        sender,
        ['StatusCallback', settings.statusCallbackUrl],
      ])
      let response
      try {
        response = await sendProviderRequest(
          agent,
          endpoint,
          {
            method: 'POST',
            headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
            body: body.toString(),
          },
          signal,
        )
      } catch (error) {
        throw error instanceof TransportFailureError ? transportFault(error) : error
      }
      const { statusCode, headers } = response
      const { code, sid } = ((await jsonOf(response)) ?? {}) as { code?: unknown; sid?: unknown }
      const errorCode = typeof code === 'number' && Number.isInteger(code) ? code : null
      const fault = classifyTwilioAnswer(statusCode, errorCode)
      if (fault) {
        const retryAt = fault === 'throttled' ? providerRetryAt({ retryAfter: headerOf(headers, 'retry-after') }, clock()) : null
        throw providerFault(fault, errorCode === null ? `HTTP${statusCode}` : `twilio_${errorCode}`, retryAt)
      }
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (at-least-once: docs/architecture.md §8, decision 5).
      if (typeof sid !== 'string' || !/^[A-Z]{2}[0-9a-fA-F]{32}$/.test(sid)) throw providerFault('indeterminate', 'UnreadableSuccess')
      return { providerMessageId: sid }
    },
    close: () => void agent.close(),
  }
}
