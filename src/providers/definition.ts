import type { z } from 'zod'
import type { Problem, ProcessRole } from '../../config/fields.ts'
import type { CoreConfig } from '../../config/schema.ts'
import type { VariableDoc } from '../../config/variables.ts'
import type { Logger } from '../logging/logger.ts'
import type { Channel, ProviderId } from '../outbox/constants.ts'
import type { FaultAnswers } from './faults.ts'
import type { PhoneInbox } from './phone-inbox.ts'
import type { Provider } from './provider.ts'
import type { WebhookRoutes } from './webhooks.ts'

/** A provider's own environment variables, as parsed. */
export type SettingsOf<S extends z.ZodRawShape> = z.output<z.ZodObject<S>>

/** Whether this provider is the one (or one of those) its channel sends through, and for which process. */
export type SettingsContext = { role: ProcessRole; deployed: boolean; selected: boolean }

/** A provider's slice of the environment schema: the variables, the docs row of each, and the checks loadConfig runs. */
export type SettingsSlice<S extends z.ZodRawShape, C> = {
  shape: S
  /** Every variable of the slice, worded for docs/configuration.md. */
  docs: { readonly [K in keyof S]: VariableDoc }
  /** URL variables that must be https:// in staging and production (plain http only to this machine). */
  httpsOnly?: readonly (keyof S & string)[]
  /** What staging and production require while the provider is selected, and the condition as the docs word it. */
  requiredWhenSelected?: { role: ProcessRole; variables: readonly (keyof S & string)[]; when: string }
  /** What keeps these settings from starting a process (half a set, no sender), naming variables, never values. */
  problems?(config: C, context: SettingsContext): Problem[]
}

/** A connector the worker sends through, closed when it stops. */
export type Connector = Provider & { close(): void }

/** What `npm start` runs in place of a provider that is not configured: a local fake, and the settings that point at it. */
export type DevFake<C> = (
  config: C,
  context: { inbox: PhoneInbox; logger: Logger; channelConfigured: boolean },
) => Promise<RunningDevFake | null>

export type RunningDevFake = {
  /** Settings the worker's connector is built with (the fake's URL, its account). */
  worker: Readonly<Record<string, unknown>>
  /** Settings the web reads (the fake's webhook secret). */
  web: Readonly<Record<string, unknown>>
  /** A page that shows what the fake took (the SES emulator's inbox). */
  inboxUrl?: string
  /** Told where the web listens, once it does (a fake that posts status webhooks). */
  webStarted?(webUrl: string): void
  stop(): Promise<void>
}

/**
 * One provider (Kratos courier's port, River's driver): its id and channel for the port, and what
 * the registry (src/providers/registry.ts) needs to wire it in: its settings slice, whether a
 * deployment configured it, its connector, its fault answers, its inbound webhook routes and the
 * local fake of `npm start`. Adding a provider is its folder and one line of the registry (and a
 * migration for the provider id CHECKs; docs/architecture.md §9).
 */
export interface ProviderDefinition<S extends z.ZodRawShape, C extends CoreConfig & SettingsOf<S>, W = never> {
  readonly id: ProviderId
  readonly channel: Channel
  /** The display name docs use. */
  readonly title: string
  /** What operators write for it where its channel names providers (EMAIL_PROVIDERS, WHATSAPP_PROVIDER); default: its id. */
  readonly choice?: string
  readonly settings: SettingsSlice<S, C>
  /** Whether the deployment set it up: its sending settings are there. */
  configured(config: C): boolean
  /** Its connector, for a worker whose channel selection names it. */
  fromConfig(config: C): Connector
  /** Its own answer to each case of the fault table (src/providers/faults.ts). */
  readonly faultAnswers: FaultAnswers
  /** Its inbound webhook: routes the web mounts, bound to the settings they read (W: only those, so the web needs no more). */
  readonly webhook?: WebhookRoutes<W>
  readonly dev?: DevFake<C>
}

/** Keeps a definition's own settings types while it is written (the registry then lists it beside the others). */
export const defineProvider = <S extends z.ZodRawShape, C extends CoreConfig & SettingsOf<S>, W = never>(
  definition: ProviderDefinition<S, C, W>,
): ProviderDefinition<S, C, W> => definition
