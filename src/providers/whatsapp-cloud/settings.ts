import { z } from 'zod'
import { url } from '../../../config/fields.ts'
import type { CoreConfig } from '../../../config/schema.ts'
import type { SettingsOf, SettingsSlice } from '../definition.ts'

/** Meta's Graph API with a pinned version (v25.0: released February 2026, available until July 2028). */
export const WHATSAPP_CLOUD_DEFAULT_API_URL = 'https://graph.facebook.com/v25.0'

/** The template language per locale of ours when WHATSAPP_CLOUD_TEMPLATE_LANGUAGES is unset. */
export const WHATSAPP_CLOUD_DEFAULT_LANGUAGES = 'en:en_US,de:de,es:es'

/** `en:en_US,de:de` → a map, the first entry the fallback for any other locale; pure, table-tested. */
export function parseTemplateLanguages(text: string): { byLocale: ReadonlyMap<string, string>; fallback: string } {
  const entries = text.split(',').map((part) => {
    const match = /^\s*([a-z]{2,3})\s*:\s*([a-z]{2,3}(?:_[A-Z]{2})?)\s*$/.exec(part)
    if (!match) throw new Error('expected locale:language pairs like en:en_US,de:de,es:es')
    return [match[1]!, match[2]!] as const
  })
  return { byLocale: new Map(entries), fallback: entries[0]![1] }
}

/** The WhatsApp Cloud API's environment variables (docs/configuration.md "WhatsApp Cloud API"). */
export const WHATSAPP_CLOUD_SHAPE = {
  WHATSAPP_CLOUD_API_URL: url.default(WHATSAPP_CLOUD_DEFAULT_API_URL),
  WHATSAPP_CLOUD_ACCESS_TOKEN: z.string().min(1).optional(),
  WHATSAPP_CLOUD_PHONE_NUMBER_ID: z
    .string()
    .regex(/^\d{1,32}$/, 'the numeric phone number id')
    .optional(),
  /** The approved authentication template's name. */
  WHATSAPP_CLOUD_TEMPLATE: z
    .string()
    .regex(/^[a-z0-9_]{1,512}$/, 'a template name: lowercase letters, digits and _')
    .optional(),
  /** Our locale → the template's language code, `en:en_US,de:de`; the first is the fallback. */
  WHATSAPP_CLOUD_TEMPLATE_LANGUAGES: z
    .string()
    .default(WHATSAPP_CLOUD_DEFAULT_LANGUAGES)
    .refine((text) => {
      try {
        return parseTemplateLanguages(text).fallback !== ''
      } catch {
        return false
      }
    }, 'expected locale:language pairs like en:en_US,de:de,es:es'),
  /** The Meta app's secret, which signs WhatsApp Cloud API webhooks; unset = POST /webhooks/whatsapp-cloud refuses everything. */
  WHATSAPP_CLOUD_APP_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /** The token Meta's subscription handshake must present; unset = GET /webhooks/whatsapp-cloud refuses everything. */
  WHATSAPP_CLOUD_VERIFY_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
}

export type WhatsAppCloudConfig = CoreConfig & SettingsOf<typeof WHATSAPP_CLOUD_SHAPE>

/** The three settings an account needs to send: all or none. */
export const CLOUD_SENDING = ['WHATSAPP_CLOUD_ACCESS_TOKEN', 'WHATSAPP_CLOUD_PHONE_NUMBER_ID', 'WHATSAPP_CLOUD_TEMPLATE'] as const

export const whatsAppCloudSettings: SettingsSlice<typeof WHATSAPP_CLOUD_SHAPE, WhatsAppCloudConfig> = {
  shape: WHATSAPP_CLOUD_SHAPE,
  docs: {
    WHATSAPP_CLOUD_API_URL: {
      usedBy: 'worker',
      meaning:
        'the Graph API base with its pinned version; `https://` in staging/production (plain `http://` only to a local relay or fake, as for `SES_ENDPOINT`)',
    },
    WHATSAPP_CLOUD_ACCESS_TOKEN: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'WhatsApp Cloud API sending account: the access token (a system user’s), the phone number id, and the approved *authentication* template (with its copy-code button) that carries the code; all three or none (some alone stop the process, naming the missing). Codes only: an invitation or security notice goes by the next phone channel ([WhatsApp Cloud API](delivery.md#whatsapp-cloud-api))',
    },
    WHATSAPP_CLOUD_PHONE_NUMBER_ID: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'WhatsApp Cloud API sending account: the access token (a system user’s), the phone number id, and the approved *authentication* template (with its copy-code button) that carries the code; all three or none (some alone stop the process, naming the missing). Codes only: an invitation or security notice goes by the next phone channel ([WhatsApp Cloud API](delivery.md#whatsapp-cloud-api))',
    },
    WHATSAPP_CLOUD_TEMPLATE: {
      usedBy: 'worker',
      shownDefault: '–',
      meaning:
        'WhatsApp Cloud API sending account: the access token (a system user’s), the phone number id, and the approved *authentication* template (with its copy-code button) that carries the code; all three or none (some alone stop the process, naming the missing). Codes only: an invitation or security notice goes by the next phone channel ([WhatsApp Cloud API](delivery.md#whatsapp-cloud-api))',
    },
    WHATSAPP_CLOUD_TEMPLATE_LANGUAGES: {
      usedBy: 'worker',
      meaning:
        "our locale → the template language it was approved in, `locale:code` pairs; a locale not listed gets the first pair's language",
    },
    WHATSAPP_CLOUD_APP_SECRET: {
      usedBy: 'web',
      shownDefault: '–',
      meaning:
        "the Meta app's secret (≥ 16 characters): `POST /webhooks/whatsapp-cloud` accepts only bodies whose `X-Hub-Signature-256` it signed; unset = every status refused",
    },
    WHATSAPP_CLOUD_VERIFY_TOKEN: {
      usedBy: 'web',
      shownDefault: '–',
      meaning:
        'the verify token you give Meta when subscribing the webhook (≥ 16 characters): `GET /webhooks/whatsapp-cloud` echoes `hub.challenge` only to it; unset = every handshake refused',
    },
  },
  httpsOnly: ['WHATSAPP_CLOUD_API_URL'],
  // Half an account is a typo, never a choice.
  problems(config) {
    const set = CLOUD_SENDING.filter((name) => config[name] !== undefined)
    if (set.length === 0 || set.length === CLOUD_SENDING.length) return []
    return CLOUD_SENDING.filter((name) => config[name] === undefined).map((variable) => ({
      variable,
      problem: `is required with ${set.join(', ')}: set all of ${CLOUD_SENDING.join(', ')} for the WhatsApp Cloud API, or none`,
    }))
  },
}
