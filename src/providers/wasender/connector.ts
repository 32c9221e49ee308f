import { headerOf, jsonOf, providerAgent, sendProviderRequest, transportFault, TransportFailureError } from '../http.ts'
import { providerFault, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import { classifyWasenderAnswer } from './faults.ts'

export type WasenderSettings = {
  apiUrl: string
  apiKey: string
  clock?: () => Date
  /** Sends in flight at most (WORKER_CONCURRENCY): one connection each, so no send queues for a socket. */
  concurrency?: number
}

/**
 * WhatsApp through Wasender: `POST /api/send-message` with a bearer key, `{to, text}`; accepted
 * only on a 2xx whose body says `success: true` with a `data.msgId`. Its answers map to the fault
 * table in faults.ts; Wasender's text is never copied anywhere (it may echo the number).
 */
export function createWasenderConnector(settings: WasenderSettings): Provider & { close(): void } {
  const agent = providerAgent(settings.concurrency)
  const endpoint = new URL('/api/send-message', settings.apiUrl).toString()
  const clock = settings.clock ?? (() => new Date())
  return {
    id: 'wasender',
    channel: 'whatsapp',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      let response
      try {
        response = await sendProviderRequest(
          agent,
          endpoint,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json', accept: 'application/json' },
            body: JSON.stringify({ to: message.destination, text: message.text }),
          },
          signal,
        )
      } catch (error) {
        throw error instanceof TransportFailureError ? transportFault(error) : error
      }
      const { statusCode, headers } = response
      const body = await jsonOf(response)
      const fault = classifyWasenderAnswer(statusCode, body)
      if (fault) {
        const retryAt =
          fault === 'throttled'
            ? providerRetryAt(
                { retryAfter: headerOf(headers, 'retry-after'), rateLimitReset: headerOf(headers, 'x-ratelimit-reset') },
                clock(),
              )
            : null
        throw providerFault(fault, `HTTP${statusCode}`, retryAt)
      }
      const { success, data } = (body ?? {}) as { success?: unknown; data?: { msgId?: unknown } }
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (at-least-once: docs/architecture.md §8, decision 5).
      if (success !== true || data?.msgId === undefined || data.msgId === null) throw providerFault('indeterminate', 'UnreadableSuccess')
      // Wasender's msgId is a number or a string; whatever else it might be is kept in its default spelling, as always.
      // eslint-disable-next-line @typescript-eslint/no-base-to-string
      return { providerMessageId: String(data.msgId) }
    },
    close: () => void agent.close(),
  }
}
