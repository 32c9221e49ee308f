import { Agent, request, type Dispatcher } from 'undici'
import type { Logger } from '../../logging/logger.ts'
import type { FailureClass } from '../../outbox/constants.ts'
import { DeliveryFailureError, type FailureEffect, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'

type Classified = { failureClass: FailureClass; providerCode: string; effect?: FailureEffect }

/**
 * Twilio REST error codes about the recipient (its error dictionary): 21211 invalid `To`, 21408
 * the `To` number's region is not enabled for this account, 21610 the recipient replied STOP,
 * 21612 `To` cannot be reached from this sender, 21614 `To` is not a mobile number. Sending the
 * same message again can never succeed.
 */
// 21606 ("not a valid message-capable phone number for this destination") is the sender's, but per
// destination: were it ours for the whole provider, one person's number could hold SMS down for all.
const RECIPIENT_CODES = new Set([21211, 21408, 21606, 21610, 21612, 21614])

/**
 * Codes that say Twilio refused *us*: 20003 authentication failed, 20404 no such account (a wrong
 * TWILIO_ACCOUNT_SID), 21212 a `From` that is not a valid number at all. Nothing about the
 * person: no attempt is spent on them (`provider_misconfigured`).
 */
const OUR_CODES = new Set([20003, 20404, 21212])

/** Maps a Twilio answer (HTTP status and the error body's `code`) to our taxonomy; null for a success status. */
export function classifyTwilioAnswer(status: number, code: number | null): Classified | null {
  if (status >= 200 && status < 300) return null
  const providerCode = code === null ? `HTTP${status}` : `twilio_${code}`
  if (status === 429 || code === 20429) return { failureClass: 'THROTTLED', providerCode }
  if (status === 401 || status === 403 || (code !== null && OUR_CODES.has(code)))
    return { failureClass: 'UNAVAILABLE', providerCode, effect: 'provider_misconfigured' }
  if (code !== null && RECIPIENT_CODES.has(code)) return { failureClass: 'REJECTED', providerCode }
  // A gateway that timed out may have passed the request on: ambiguous, as a timeout after writing is.
  if (status === 504) return { failureClass: 'INDETERMINATE', providerCode }
  if (status >= 500) return { failureClass: 'UNAVAILABLE', providerCode }
  // Any other 4xx is about this request (Twilio's 400 carries the reason in `code`): retrying it cannot help.
  if (status >= 400) return { failureClass: 'REJECTED', providerCode }
  return { failureClass: 'INDETERMINATE', providerCode }
}

/**
 * A transport failure or our own timeout: UNAVAILABLE while the request had not reached a
 * connected socket (Twilio cannot have acted on it), INDETERMINATE once it had (it may have).
 */
export function classifyTwilioTransport(error: unknown, written: boolean, timedOut: boolean): Classified {
  const { name, code } = (error ?? {}) as { name?: string; code?: string }
  const providerCode = timedOut ? 'Timeout' : (code ?? name ?? 'unknown')
  return { failureClass: written ? 'INDETERMINATE' : 'UNAVAILABLE', providerCode }
}

/** The handler `handler`, telling `onWritten` when undici starts the request on a connected socket (just before writing it). */
function watchWrite(handler: Dispatcher.DispatchHandler, onWritten: () => void): Dispatcher.DispatchHandler {
  return {
    onRequestStart: (controller, context) => {
      onWritten()
      handler.onRequestStart?.(controller, context)
    },
    onRequestUpgrade: (controller, statusCode, headers, socket) => handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
    onResponseStart: (controller, statusCode, headers, statusMessage) =>
      handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
    onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
    onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
    onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
  }
}

/** Rejects when `signal` aborts (at once if it has). */
const abortOf = (signal: AbortSignal) =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error)
    else signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })
  })

export type TwilioSettings = {
  apiUrl: string
  accountSid: string
  /** Basic auth: the account SID and auth token, or an API key's SID and secret when given. */
  credentials: { username: string; password: string }
  /** Exactly one: a Messaging Service (Twilio picks the sender) or a From number. */
  sender: { messagingServiceSid: string } | { from: string }
  /** Where Twilio posts this message's status callbacks (twilio-signature.ts). */
  statusCallbackUrl: string
  logger: Logger
  clock?: () => Date
  /** Sends in flight at most (WORKER_CONCURRENCY): one connection each, so no send queues for a socket. */
  concurrency?: number
}

/**
 * SMS through Twilio's Programmable Messaging API: `POST /2010-04-01/Accounts/{sid}/Messages.json`,
 * form-encoded `To`, `Body`, the sender and `StatusCallback`; accepted on a 2xx whose JSON holds
 * the message `sid`. Twilio's error text is never copied anywhere (it echoes the number): a
 * failure carries its code only.
 */
export function createTwilioConnector(settings: TwilioSettings): Provider & { close(): void } {
  const agent = new Agent({ keepAliveTimeout: 10_000, connections: Math.max(64, settings.concurrency ?? 0) })
  const endpoint = new URL(`/2010-04-01/Accounts/${encodeURIComponent(settings.accountSid)}/Messages.json`, settings.apiUrl).toString()
  const authorization = `Basic ${Buffer.from(`${settings.credentials.username}:${settings.credentials.password}`).toString('base64')}`
  const sender: [string, string] =
    'messagingServiceSid' in settings.sender ? ['MessagingServiceSid', settings.sender.messagingServiceSid] : ['From', settings.sender.from]
  const clock = settings.clock ?? (() => new Date())
  let misconfigurationLogged = false
  return {
    id: 'twilio',
    channel: 'sms',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      let written = false
      const dispatcher = agent.compose(
        (dispatch) => (options, handler) =>
          dispatch(
            options,
            watchWrite(handler, () => (written = true)),
          ),
      )
      const body = new URLSearchParams([
        ['To', message.destination],
        ['Body', message.text],
        sender,
        ['StatusCallback', settings.statusCallbackUrl],
      ])
      let response
      try {
        const sent = request(endpoint, {
          method: 'POST',
          dispatcher,
          signal,
          headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body: body.toString(),
        })
        // undici notices an abort during a TLS handshake only at its connect timeout (10 s): the send's own bound wins.
        sent.then((late) => (signal.aborted ? late.body.dump() : undefined)).catch(() => undefined)
        response = await Promise.race([sent, abortOf(signal)])
      } catch (error) {
        const { failureClass, providerCode } = classifyTwilioTransport(error, written, signal.aborted)
        throw new DeliveryFailureError(failureClass, providerCode)
      }
      const { statusCode, headers } = response
      let answer: unknown
      try {
        answer = await response.body.json()
      } catch {
        answer = undefined
      }
      const { code, sid } = (answer ?? {}) as { code?: unknown; sid?: unknown }
      const failure = classifyTwilioAnswer(statusCode, typeof code === 'number' && Number.isInteger(code) ? code : null)
      if (failure) {
        if (failure.effect === 'provider_misconfigured' && !misconfigurationLogged) {
          misconfigurationLogged = true
          settings.logger.error('MISCONFIGURATION: Twilio refused our account, credentials or sender; SMS delivery is failing', {
            status: statusCode,
            providerCode: failure.providerCode,
          })
        }
        const header = (name: string) => {
          const value = headers[name]
          return Array.isArray(value) ? value[0] : value
        }
        const retryAt = failure.failureClass === 'THROTTLED' ? providerRetryAt({ retryAfter: header('retry-after') }, clock()) : null
        throw new DeliveryFailureError(failure.failureClass, failure.providerCode, retryAt, false, failure.effect ?? null)
      }
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (at-least-once: docs/architecture.md §8, decision 5).
      if (typeof sid !== 'string' || !/^[A-Z]{2}[0-9a-fA-F]{32}$/.test(sid))
        throw new DeliveryFailureError('INDETERMINATE', 'UnreadableSuccess')
      return { providerMessageId: sid }
    },
    close: () => void agent.close(),
  }
}
