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

type WhatsAppSettings = {
  WHATSAPP_PROVIDER?: 'cloud' | 'wasender'
  WASENDER_API_URL?: string
  WASENDER_API_KEY?: string
  WHATSAPP_CLOUD_ACCESS_TOKEN?: string
  WHATSAPP_CLOUD_PHONE_NUMBER_ID?: string
  WHATSAPP_CLOUD_TEMPLATE?: string
}

const CLOUD_SENDING = ['WHATSAPP_CLOUD_ACCESS_TOKEN', 'WHATSAPP_CLOUD_PHONE_NUMBER_ID', 'WHATSAPP_CLOUD_TEMPLATE'] as const

/**
 * Which WhatsApp provider sends: WHATSAPP_PROVIDER, else the one configured; null for none (no
 * WhatsApp channel). Both configured without WHATSAPP_PROVIDER is refused by `whatsAppProblems`.
 */
export function whatsAppProvider(config: WhatsAppSettings): 'cloud' | 'wasender' | null {
  if (config.WHATSAPP_PROVIDER) return config.WHATSAPP_PROVIDER
  if (CLOUD_SENDING.every((name) => config[name] !== undefined)) return 'cloud'
  if (config.WASENDER_API_URL !== undefined && config.WASENDER_API_KEY !== undefined) return 'wasender'
  return null
}

/** What keeps the WhatsApp settings from starting a process: half a Cloud API account, an ambiguous or unconfigured choice. */
export function whatsAppProblems(config: WhatsAppSettings): { variable: string; problem: string }[] {
  const cloudSet = CLOUD_SENDING.filter((name) => config[name] !== undefined)
  const cloud = cloudSet.length === CLOUD_SENDING.length
  const wasender = config.WASENDER_API_URL !== undefined && config.WASENDER_API_KEY !== undefined
  // Half an account is a typo, never a choice.
  if (cloudSet.length > 0 && !cloud)
    return CLOUD_SENDING.filter((name) => config[name] === undefined).map((variable) => ({
      variable,
      problem: `is required with ${cloudSet.join(', ')}: set all of ${CLOUD_SENDING.join(', ')} for the WhatsApp Cloud API, or none`,
    }))
  if (config.WHATSAPP_PROVIDER === undefined && cloud && wasender)
    return [
      {
        variable: 'WHATSAPP_PROVIDER',
        problem: 'is required when both the WhatsApp Cloud API and Wasender are configured: `cloud` or `wasender`',
      },
    ]
  if (config.WHATSAPP_PROVIDER === 'cloud' && !cloud)
    return [{ variable: 'WHATSAPP_PROVIDER', problem: `is cloud: set ${CLOUD_SENDING.join(', ')}` }]
  if (config.WHATSAPP_PROVIDER === 'wasender' && !wasender)
    return [{ variable: 'WHATSAPP_PROVIDER', problem: 'is wasender: set WASENDER_API_URL and WASENDER_API_KEY' }]
  return []
}
