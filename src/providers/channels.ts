import { z } from 'zod'
import type { Problem } from '../../config/fields.ts'
import { parsedText } from '../../config/fields.ts'
import type { VariableDoc } from '../../config/variables.ts'
import type { Channel, ProviderId } from '../outbox/constants.ts'
import type { CoreConfig } from '../../config/schema.ts'
import { PROVIDERS, type ProviderSettings, type RegisteredProvider } from './registry.ts'

/** The name operators write for a provider where its channel names providers. */
const choiceOf = (provider: RegisteredProvider): string => provider.choice ?? provider.id
const ofChannel = (channel: Channel) => PROVIDERS.filter((provider) => provider.channel === channel)

/** Parses `ses,smtp` into the order the email providers are tried; pure so it can be table-tested. */
export function parseEmailProviders(text: string): ProviderId[] {
  const email = ofChannel('email')
  const names = text.split(',').map((part) => part.trim())
  const chosen = names.map((name) => email.find((provider) => choiceOf(provider) === name))
  if (names.length === 0 || chosen.some((provider) => provider === undefined) || new Set(names).size !== names.length)
    throw new Error(`must be an ordered comma-separated list of ${email.map(choiceOf).join(', ')}, each at most once`)
  return chosen.map((provider) => provider!.id)
}

const whatsAppChoices = ofChannel('whatsapp').map(choiceOf) as [string, ...string[]]

/** The settings that choose among a channel's providers (docs/configuration.md "Channels"). */
export const CHANNEL_SHAPE = {
  /** The email providers in the order they are tried, `ses,smtp` (docs/configuration.md). */
  EMAIL_PROVIDERS: parsedText(parseEmailProviders).default(['ses']),
  /** Which WhatsApp provider sends (default: the configured one; several configured = refused without it). */
  WHATSAPP_PROVIDER: z.enum(whatsAppChoices).optional(),
}

export type ChannelSettings = z.output<z.ZodObject<typeof CHANNEL_SHAPE>>

/** The configuration a channel's choice reads: the core, the channels' settings and every provider's (src/providers/config.ts `Config`). */
type Config = CoreConfig & ChannelSettings & ProviderSettings

export const CHANNEL_DOCS: { readonly [K in keyof typeof CHANNEL_SHAPE]: VariableDoc } = {
  EMAIL_PROVIDERS: {
    usedBy: 'worker',
    shownDefault: '`ses`',
    meaning:
      'the email providers in the order they are tried: `ses`, `smtp`, `ses,smtp` or `smtp,ses` (each at most once). A team without SES sets `smtp` alone; see [docs/deliverability.md](deliverability.md#choosing-an-smtp-relay)',
  },
  WHATSAPP_PROVIDER: {
    usedBy: 'worker',
    shownDefault: 'the configured one',
    meaning:
      "`cloud` (Meta's WhatsApp Cloud API) or `wasender`: which provider sends WhatsApp. Required when both are configured (the process refuses to start without it); naming one that is not configured stops the process too",
  },
}

/** The WhatsApp provider WHATSAPP_PROVIDER names, else the one configured; null for none (no WhatsApp channel). */
export function whatsAppProvider(config: Config): ProviderId | null {
  const whatsapp = ofChannel('whatsapp')
  if (config.WHATSAPP_PROVIDER) return whatsapp.find((provider) => choiceOf(provider) === config.WHATSAPP_PROVIDER)?.id ?? null
  const configured = whatsapp.filter((provider) => provider.configured(config))
  return configured.length === 1 ? configured[0]!.id : null
}

/** What keeps the channel choices from starting a process: an ambiguous WhatsApp choice, or one naming an unconfigured provider. */
export function channelProblems(config: Config): Problem[] {
  const whatsapp = ofChannel('whatsapp')
  const configured = whatsapp.filter((provider) => provider.configured(config))
  if (config.WHATSAPP_PROVIDER === undefined && configured.length > 1)
    return [
      {
        variable: 'WHATSAPP_PROVIDER',
        problem: `is required when ${configured.map((provider) => provider.title).join(' and ')} are both configured: ${configured.map((provider) => `\`${choiceOf(provider)}\``).join(' or ')}`,
      },
    ]
  const named = whatsapp.find((provider) => choiceOf(provider) === config.WHATSAPP_PROVIDER)
  if (named && !configured.includes(named))
    return [
      { variable: 'WHATSAPP_PROVIDER', problem: `is ${choiceOf(named)}, but ${named.title} is not configured (docs/configuration.md)` },
    ]
  return []
}

/**
 * Each channel's providers in the order the worker tries them: email in EMAIL_PROVIDERS order,
 * WhatsApp the one WHATSAPP_PROVIDER (or the configuration) names, any other channel every
 * provider configured for it. This is the one place a channel chooses among its providers.
 */
export function selectedProviders(config: Config): RegisteredProvider[] {
  const whatsapp = whatsAppProvider(config)
  const chosen = (channel: Channel): RegisteredProvider[] => {
    if (channel === 'email') return config.EMAIL_PROVIDERS.map((id) => PROVIDERS.find((provider) => provider.id === id)!)
    if (channel === 'whatsapp') return PROVIDERS.filter((provider) => provider.id === whatsapp)
    return ofChannel(channel).filter((provider) => provider.configured(config))
  }
  return [...new Set(PROVIDERS.map((provider) => provider.channel))].flatMap(chosen)
}
