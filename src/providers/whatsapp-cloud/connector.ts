import { parseTemplateLanguages } from './settings.ts'
import { headerOf, jsonOf, providerAgent, sendProviderRequest, transportFault, TransportFailureError } from '../http.ts'
import { providerFault, type OutgoingMessage, type Provider } from '../provider.ts'
import { providerRetryAt } from '../retry-after.ts'
import { classifyCloudApiAnswer } from './faults.ts'

export type WhatsAppCloudSettings = {
  apiUrl: string
  accessToken: string
  phoneNumberId: string
  /** The approved authentication template (with its copy-code button). */
  template: string
  /** WHATSAPP_CLOUD_TEMPLATE_LANGUAGES. */
  languages: string
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
  const agent = providerAgent(settings.concurrency)
  const endpoint = `${settings.apiUrl.replace(/\/+$/, '')}/${encodeURIComponent(settings.phoneNumberId)}/messages`
  const languages = parseTemplateLanguages(settings.languages)
  const clock = settings.clock ?? (() => new Date())
  return {
    id: 'whatsapp_cloud',
    channel: 'whatsapp',
    async dispatch(message: OutgoingMessage, signal: AbortSignal) {
      if (message.code === undefined) throw providerFault('recipient_unreachable', 'NoTemplateForPurpose')
      const language = languages.byLocale.get(message.locale ?? '') ?? languages.fallback
      let response
      try {
        response = await sendProviderRequest(
          agent,
          endpoint,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${settings.accessToken}`, 'content-type': 'application/json', accept: 'application/json' },
            body: JSON.stringify(authenticationTemplateBody(message.destination, settings.template, language, message.code)),
          },
          signal,
        )
      } catch (error) {
        throw error instanceof TransportFailureError ? transportFault(error) : error
      }
      const body = await jsonOf(response)
      // Meta's error text is never copied: it may echo the number or the template's parameters.
      const { code, error_subcode: subcode } = (body as { error?: { code?: unknown; error_subcode?: unknown } } | undefined)?.error ?? {}
      const numbered = (value: unknown) => (typeof value === 'number' ? value : undefined)
      const fault = classifyCloudApiAnswer(response.statusCode, { code: numbered(code), subcode: numbered(subcode) })
      if (fault) {
        const retryAt =
          fault === 'throttled' || fault === 'recipient_throttled'
            ? providerRetryAt({ retryAfter: headerOf(response.headers, 'retry-after') }, clock())
            : null
        throw providerFault(fault, typeof code === 'number' ? `WA${code}` : `HTTP${response.statusCode}`, retryAt)
      }
      const id = (body as { messages?: { id?: unknown }[] } | undefined)?.messages?.[0]?.id
      // A 2xx we cannot read may or may not have been sent: ambiguous, so retried (docs/architecture.md §8, decision 5).
      if (typeof id !== 'string' || id.length === 0) throw providerFault('indeterminate', 'UnreadableSuccess')
      return { providerMessageId: id }
    },
    close: () => void agent.close(),
  }
}
