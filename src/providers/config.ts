import { configurationPage, type ConfigurationSection } from '../../config/configuration-doc.ts'
import { ConfigError, type Problem, type ProcessRole } from '../../config/fields.ts'
import {
  checkRoleNames,
  checkTiming,
  coreSchema,
  HTTPS_ONLY_IN_PRODUCTION,
  insecureUrls,
  missingInProduction,
  parseEnvironment,
  REQUIRED_IN_PRODUCTION,
  type CoreConfig,
} from '../../config/schema.ts'
import { VARIABLES } from '../../config/variables.ts'
import { CHANNEL_DOCS, CHANNEL_SHAPE, channelProblems, selectedProviders, type ChannelSettings } from './channels.ts'
import { PROVIDERS, type ProviderSettings, type ProviderShapes, type RegisteredProvider } from './registry.ts'

/** The environment schema: the core settings, the channels' choices and every registered provider's slice. */
export const envSchema = coreSchema.extend({
  ...CHANNEL_SHAPE,
  ...(Object.assign({}, ...PROVIDERS.map((provider) => provider.settings.shape)) as ProviderShapes),
})

/** The validated configuration of a process: keys are Buffers so they never print by accident as text. */
export type Config = CoreConfig & ChannelSettings & ProviderSettings

/** Whether the channel of `provider` sends through it in this configuration. */
const selected = (config: Config): ((provider: RegisteredProvider) => boolean) => {
  const chosen = new Set(selectedProviders(config))
  return (provider) => chosen.has(provider)
}

/** What staging and production require of a process: the core's list, and each selected provider's. */
function missing(config: Config, role: ProcessRole): Problem[] {
  const isSelected = selected(config)
  const unset = (variable: string) => (config as Readonly<Record<string, unknown>>)[variable] === undefined
  const core = REQUIRED_IN_PRODUCTION[role].filter(unset)
  const providers = PROVIDERS.flatMap((provider) => {
    const required = provider.settings.requiredWhenSelected
    return required?.role === role && isSelected(provider) ? required.variables.filter(unset) : []
  })
  return [...core, ...providers].map((variable) => missingInProduction(variable, role, config.NODE_ENV))
}

/**
 * Reads the environment once. Invalid values always stop the process; in staging and production a
 * missing setting the given process needs does too, since neither embedded fallback exists there.
 * Each provider's slice checks its own settings (src/providers/<name>/settings.ts).
 */
export function loadConfig(env: NodeJS.ProcessEnv, role: ProcessRole): Config {
  const config: Config = parseEnvironment(envSchema, env)
  checkRoleNames(config)
  const deployed = config.NODE_ENV === 'production' || config.NODE_ENV === 'staging'
  const isSelected = selected(config)
  for (const provider of PROVIDERS) {
    const problems = provider.settings.problems?.(config, { role, deployed, selected: isSelected(provider) }) ?? []
    if (problems.length > 0) throw new ConfigError(problems)
  }
  const channels = channelProblems(config)
  if (channels.length > 0) throw new ConfigError(channels)
  if (deployed) {
    if (role === 'all-in-one')
      throw new ConfigError([
        { variable: 'NODE_ENV', problem: '`npm start` is the development mode; run the Procfile processes in staging and production' },
      ])
    const absent = missing(config, role)
    if (absent.length > 0) throw new ConfigError(absent)
    // Provider endpoints may speak plain HTTP only to this machine (a local relay); links never.
    const providerUrls = Object.fromEntries(
      PROVIDERS.flatMap(({ settings }) => (settings.httpsOnly ?? []).map((variable) => [variable, 'loopback'] as const)),
    )
    const insecure = insecureUrls(config, { ...providerUrls, ...HTTPS_ONLY_IN_PRODUCTION }, config.NODE_ENV)
    if (insecure.length > 0) throw new ConfigError(insecure)
  }
  checkTiming(config, role)
  return config
}

const ROLES: readonly ProcessRole[] = ['release', 'web', 'worker', 'cli']

/** The "required in production" cell of a variable: the processes that refuse to start without it, and when. */
function requiredIn(variable: string): string {
  const core = ROLES.filter((role) => (REQUIRED_IN_PRODUCTION[role] as readonly string[]).includes(variable))
  if (core.length > 0) return core.map((role) => (role === 'cli' ? 'CLI' : role)).join(', ')
  const rule = PROVIDERS.map(({ settings }) => settings.requiredWhenSelected).find((required) =>
    required?.variables.some((name) => name === variable),
  )
  return rule ? `${rule.role === 'cli' ? 'CLI' : rule.role} (${rule.when})` : '–'
}

/** docs/configuration.md: the core table, the channels' choices, then one table per registered provider. */
export function configurationDoc(): string {
  const sections: ConfigurationSection[] = [
    { variables: VARIABLES },
    {
      heading: 'Channels',
      intro: 'Which of a channel’s providers send, and in which order ([Channels](delivery.md#channels)).',
      variables: CHANNEL_DOCS,
    },
    ...PROVIDERS.map((provider) => ({
      heading: provider.title,
      intro: `The \`${provider.id}\` provider (${provider.channel}); its settings slice: \`src/providers/${provider.id.replaceAll('_', '-')}/settings.ts\`.`,
      variables: provider.settings.docs,
    })),
  ]
  return configurationPage(envSchema, sections, requiredIn)
}
