import type { Logger } from '../logging/logger.ts'
import type { Channel } from '../outbox/constants.ts'
import { selectedProviders } from './channels.ts'
import type { Config } from './config.ts'
import type { Connector, RunningDevFake } from './definition.ts'
import type { PhoneInbox } from './phone-inbox.ts'
import { PROVIDERS } from './registry.ts'
import type { BoundWebhook, WebhookRoute, WebhookRoutes, WebhookSeams } from './webhooks.ts'

/**
 * The worker's connectors: each channel's selected providers (./channels.ts), in the order they
 * are tried. Outside development the settings of each are required (loadConfig refused to start
 * without them); in development SES goes to the local SES emulator and a phone channel without a
 * provider is simply off (the worker says so at startup).
 */
export function providersFromConfig(config: Config): Connector[] {
  return selectedProviders(config).map((provider) => provider.fromConfig(config))
}

/** Every provider's webhook routes, as the web's API document describes them (in registry order). */
export const WEBHOOK_ROUTES: readonly WebhookRoute<never>[] = PROVIDERS.flatMap((provider) => provider.webhook?.routes ?? [])

type UnionToIntersection<U> = (U extends unknown ? (union: U) => void : never) extends (intersection: infer I) => void ? I : never
type WebhookConfigOf<P> = P extends { webhook?: WebhookRoutes<infer W> } ? W : never

/** The settings every provider's webhook reads (secrets, topics, the public origin): what the web needs for them. */
export type WebhookConfig = UnionToIntersection<WebhookConfigOf<(typeof PROVIDERS)[number]>>

/** Every webhook route with its provider's settings from `config`; unconfigured (no config), each refuses everything. */
export function bindWebhooks(config: WebhookConfig | undefined, seams: WebhookSeams = {}): BoundWebhook[] {
  const bind = (webhook: WebhookRoutes<WebhookConfig> | undefined) => webhook?.bind(config, seams) ?? []
  return PROVIDERS.flatMap((provider) => bind(provider.webhook))
}

/** What `npm start` runs in place of the providers it lacks (the SES emulator, the fake Cloud API, the fake Twilio). */
export type DevFakes = {
  worker: Partial<Config>
  web: Partial<Config>
  inboxUrl: string | null
  webStarted: (webUrl: string) => void
  stop: () => Promise<void>
}

/** Starts each registered provider's development fake that its configuration calls for. */
export async function startDevFakes(config: Config, inbox: PhoneInbox, logger: Logger): Promise<DevFakes> {
  const configuredChannels = new Set<Channel>(
    PROVIDERS.filter((provider) => provider.configured(config)).map((provider) => provider.channel),
  )
  const running: RunningDevFake[] = []
  try {
    for (const provider of PROVIDERS) {
      const fake = await provider.dev?.(config, { inbox, logger, channelConfigured: configuredChannels.has(provider.channel) })
      if (fake) running.push(fake)
    }
  } catch (error) {
    await Promise.allSettled(running.map((fake) => fake.stop()))
    throw error
  }
  return {
    worker: Object.assign({}, ...running.map((fake) => fake.worker)) as Partial<Config>,
    web: Object.assign({}, ...running.map((fake) => fake.web)) as Partial<Config>,
    inboxUrl: running.find((fake) => fake.inboxUrl)?.inboxUrl ?? null,
    webStarted: (webUrl) => running.forEach((fake) => fake.webStarted?.(webUrl)),
    stop: async () => {
      for (const fake of running.reverse()) await fake.stop().catch(() => undefined)
    },
  }
}
