import { Agent, request } from 'undici'
import { parseTemplateLanguages } from '../../../config/whatsapp-cloud.ts'
import type { Logger } from '../../logging/logger.ts'
import type { FailureClass } from '../../outbox/constants.ts'
import { DeliveryFailureError, type FailureEffect, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import { classifyWasenderError } from '../wasender/connector.ts'

type Classified = { failureClass: FailureClass; providerCode: string; effect: FailureEffect | null; recipientOnly: boolean }

// Meta's Cloud API error codes (its "Error codes" page), grouped by what they say about the send.
/** The recipient cannot get this message on WhatsApp (no WhatsApp, an old client, terms not accepted): try the next phone channel. */
const UNREACHABLE = new Set([131026, 131047])
/** Whether a Cloud API error code (a send's answer or a failed status) says this number cannot get WhatsApp. */
export const isChannelUnreachableCode = (code: number): boolean => UNREACHABLE.has(code)
/** Throughput and rate limits: the app's, the account's, the phone number's (131048, 130429), and this one recipient's (131056). */
const THROTTLING = new Set([4, 613, 80007, 130429, 131048, 131056])
/**
 * Meta refused *us*: an invalid or expired token, missing permissions, a template that does not
 * exist, is paused or takes other parameters, a locked, unpaid or unregistered sender. No retry
 * can help until someone fixes the account.
 */
const MISCONFIGURED = new Set([0, 3, 10, 190, 368, 131031, 131042, 132000, 132001, 132005, 132007, 132012, 132015, 132016, 133010])
/** Meta's own trouble: "something went wrong", the API unknown/service errors, "service unavailable". */
const META_TROUBLE = new Set([1, 2, 131000, 131016])

/**
 * Maps a Graph API answer (HTTP status and `error.code`) to our taxonomy; null for a success status.
 * The code decides where Meta documents it (its advice: build on codes, not statuses); the status otherwise.
 */
export function classifyCloudApiAnswer(status: number, code: number | undefined): Classified | null {
  if (status >= 200 && status < 300) return null
  const providerCode = code === undefined ? `HTTP${status}` : `WA${code}`
  const is = (failureClass: FailureClass, effect: FailureEffect | null = null, recipientOnly = false) => ({
    failureClass,
    providerCode,
    effect,
    recipientOnly,
  })
  if (code !== undefined) {
    if (UNREACHABLE.has(code)) return is('REJECTED', 'channel_unreachable', true)
    if (THROTTLING.has(code)) return is('THROTTLED', null, code === 131056)
    if (MISCONFIGURED.has(code) || (code >= 200 && code <= 299)) return is('UNAVAILABLE', 'provider_misconfigured')
    if (META_TROUBLE.has(code)) return is('UNAVAILABLE')
  }
  if (status === 429) return is('THROTTLED')
  if (status === 401 || status === 403) return is('UNAVAILABLE', 'provider_misconfigured')
  if (status >= 500) return is(status === 504 ? 'INDETERMINATE' : 'UNAVAILABLE')
  // Any other 4xx is about this request's recipient (131021 the sender itself, 100 a malformed number …).
  return is('REJECTED', null, true)
}

export type WhatsAppCloudSettings = {
  apiUrl: string
  accessToken: string
  phoneNumberId: string
  /** The approved authentication template (with its copy-code button). */
  template: string
  /** WHATSAPP_CLOUD_TEMPLATE_LANGUAGES. */
  languages: string
  logger: Logger
  clock?: () => Date
  concurrency?: number
}

/** The documented send of an authentication template: the code in the body and in the copy-code button. */
export function authenticationTemplateBody(to: string, template: string, language: string, code: string) {
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to,
    type: 'template',
    template: {
      name: template,
      language: { code: language },
      components: [
        { type: 'body', parameters: [{ type: 'text', text: code }] },
        { type: 'button', sub_type: 'url', index: '0', parameters: [{ type: 'text', text: code }] },
      ],
    },
  }
}

/**
 * WhatsApp through Meta's Cloud API: `POST {apiUrl}/{phone-number-id}/messages` with a bearer
 * token, the authentication template filled with the one-time code; accepted on a 2xx naming
 * `messages[0].id` (a wamid). Only codes go this way: Meta allows an authentication template to
 * carry nothing but a code, so a message without one (an invitation, a security notice) is
 * `channel_unreachable` at once, without a request, and takes the next phone channel
 * (docs/delivery.md "WhatsApp Cloud API").
 */
export function createWhatsAppCloudConnector(settings: WhatsAppCloudSettings): Provider & { close(): void } {
  const agent = new Agent({ keepAliveTimeout: 10_000, connections: Math.max(64, settings.concurrency ?? 0) })
  const endpoint = `${settings.apiUrl.replace(/\/+$/, '')}/${encodeURIComponent(settings.phoneNumberId)}/messages`
  const languages = parseTemplateLanguages(settings.languages)
  const clock = settings.clock ?? (() => new Date())
  let misconfigurationLogged = false
  return {
    id: 'whatsapp_cloud',
    channel: 'whatsapp',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      if (message.code === undefined) throw new DeliveryFailureError('REJECTED', 'NoTemplateForPurpose', null, true, 'channel_unreachable')
      const language = languages.byLocale.get(message.locale ?? '') ?? languages.fallback
      let response
      try {
        response = await request(endpoint, {
          method: 'POST',
          dispatcher: agent,
          signal,
          headers: { authorization: `Bearer ${settings.accessToken}`, 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify(authenticationTemplateBody(message.destination, settings.template, language, message.code)),
        })
      } catch (error) {
        const { failureClass, providerCode } = signal.aborted
          ? { failureClass: 'INDETERMINATE' as const, providerCode: 'Timeout' }
          : classifyWasenderError(error)
        throw new DeliveryFailureError(failureClass, providerCode)
      }
      let body: unknown
      try {
        body = await response.body.json()
      } catch {
        body = undefined
      }
      const errorCode = (body as { error?: { code?: unknown } } | undefined)?.error?.code
      const failure = classifyCloudApiAnswer(response.statusCode, typeof errorCode === 'number' ? errorCode : undefined)
      if (failure) {
        if (failure.effect === 'provider_misconfigured' && !misconfigurationLogged) {
          misconfigurationLogged = true
          // Meta's error text is never copied: it may echo the number or the template's parameters.
          settings.logger.error('MISCONFIGURATION: the WhatsApp Cloud API refused our account or template; WhatsApp delivery is failing', {
            status: response.statusCode,
            providerCode: failure.providerCode,
          })
        }
        const header = response.headers['retry-after']
        const retryAt =
          failure.failureClass === 'THROTTLED' ? providerRetryAt({ retryAfter: Array.isArray(header) ? header[0] : header }, clock()) : null
        throw new DeliveryFailureError(failure.failureClass, failure.providerCode, retryAt, failure.recipientOnly, failure.effect)
      }
      const id = (body as { messages?: { id?: unknown }[] } | undefined)?.messages?.[0]?.id
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (docs/architecture.md §8, decision 5).
      if (typeof id !== 'string' || id.length === 0) throw new DeliveryFailureError('INDETERMINATE', 'UnreadableSuccess')
      return { providerMessageId: id }
    },
    close: () => void agent.close(),
  }
}
