import { Agent, request } from 'undici'
import type { Logger } from '../../logging/logger.ts'
import type { FailureClass } from '../../outbox/constants.ts'
import { DeliveryFailureError, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'

type Classified = { failureClass: FailureClass; providerCode: string }

/** Maps a Wasender HTTP status to our taxonomy (docs/architecture.md §4, step 5); null for a success status. */
export function classifyWasenderStatus(status: number): Classified | null {
  const providerCode = `HTTP${status}`
  if (status >= 200 && status < 300) return null
  if (status === 429) return { failureClass: 'THROTTLED', providerCode }
  // Our credentials, not the destination: never a reason to give up on the person.
  if (status === 401 || status === 403) return { failureClass: 'UNAVAILABLE', providerCode }
  if (status === 400 || status === 404 || status === 422) return { failureClass: 'REJECTED', providerCode }
  if (status === 500 || status === 502 || status === 503) return { failureClass: 'UNAVAILABLE', providerCode }
  return { failureClass: 'INDETERMINATE', providerCode }
}

// Failures before the request was written: the provider cannot have acted on it.
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'])

/** Maps a transport error: refused before writing → UNAVAILABLE; anything after → INDETERMINATE. */
export function classifyWasenderError(error: unknown): Classified {
  const { name, code } = (error ?? {}) as { name?: string; code?: string }
  const providerCode = code ?? name ?? 'unknown'
  if (code && NOT_SENT_CODES.has(code)) return { failureClass: 'UNAVAILABLE', providerCode }
  return { failureClass: 'INDETERMINATE', providerCode }
}

export type WasenderSettings = {
  apiUrl: string
  apiKey: string
  logger: Logger
  clock?: () => Date
  /** Sends in flight at most (WORKER_CONCURRENCY): one connection each, so no send queues for a socket. */
  concurrency?: number
}

/**
 * WhatsApp through Wasender: `POST /api/send-message` with a bearer key, `{to, text}`; accepted
 * only on a 2xx whose body says `success: true` with a `data.msgId`.
 */
export function createWasenderConnector(settings: WasenderSettings): Provider & { close(): void } {
  const agent = new Agent({ keepAliveTimeout: 10_000, connections: Math.max(64, settings.concurrency ?? 0) })
  const endpoint = new URL('/api/send-message', settings.apiUrl).toString()
  const clock = settings.clock ?? (() => new Date())
  let misconfigurationLogged = false
  return {
    id: 'wasender',
    channel: 'whatsapp',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      let response
      try {
        response = await request(endpoint, {
          method: 'POST',
          dispatcher: agent,
          signal,
          headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ to: message.destination, text: message.text }),
        })
      } catch (error) {
        const { failureClass, providerCode } = signal.aborted
          ? { failureClass: 'INDETERMINATE' as const, providerCode: 'Timeout' }
          : classifyWasenderError(error)
        throw new DeliveryFailureError(failureClass, providerCode)
      }
      const { statusCode, headers } = response
      let body: unknown
      try {
        body = await response.body.json()
      } catch {
        body = undefined
      }
      const failure = classifyWasenderStatus(statusCode)
      if (failure) {
        if ((statusCode === 401 || statusCode === 403) && !misconfigurationLogged) {
          misconfigurationLogged = true
          settings.logger.error('MISCONFIGURATION: Wasender refused our API key; WhatsApp delivery is failing', { status: statusCode })
        }
        const header = (name: string) => {
          const value = headers[name]
          return Array.isArray(value) ? value[0] : value
        }
        const retryAt =
          failure.failureClass === 'THROTTLED'
            ? providerRetryAt({ retryAfter: header('retry-after'), rateLimitReset: header('x-ratelimit-reset') }, clock())
            : null
        throw new DeliveryFailureError(failure.failureClass, failure.providerCode, retryAt)
      }
      const { success, data } = (body ?? {}) as { success?: unknown; data?: { msgId?: unknown } }
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (at-least-once: docs/architecture.md §8, decision 5).
      if (success !== true || data?.msgId === undefined || data.msgId === null)
        throw new DeliveryFailureError('INDETERMINATE', 'UnreadableSuccess')
      // Wasender's msgId is a number or a string; whatever else it might be is kept in its default spelling, as always.
      // eslint-disable-next-line @typescript-eslint/no-base-to-string
      return { providerMessageId: String(data.msgId) }
    },
    close: () => void agent.close(),
  }
}
