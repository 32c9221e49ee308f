import { z } from 'zod'
import { envSchema, REQUIRED_IN_PRODUCTION, REQUIRED_ONLY_WHEN, type ProcessRole } from './schema.ts'
import { VARIABLES } from './variables.ts'

type JsonProperty = {
  type?: string
  enum?: unknown[]
  default?: unknown
  format?: string
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  minLength?: number
}

const ROLES: readonly ProcessRole[] = ['release', 'web', 'worker', 'cli']

/** The type a reader types: the schema's enum, integer range or string format. */
function typeOf(property: JsonProperty): string {
  if (property.enum) return property.enum.map((value) => `\`${String(value)}\``).join(' \\| ')
  if (property.type === 'integer') {
    const low = property.exclusiveMinimum !== undefined ? property.exclusiveMinimum + 1 : property.minimum
    const high = property.maximum !== undefined && property.maximum < Number.MAX_SAFE_INTEGER ? property.maximum : undefined
    return low === undefined ? 'integer' : high === undefined ? `integer ≥ ${low}` : `integer ${low}–${high}`
  }
  if (property.format === 'uri') return 'URL'
  if (property.format === 'email') return 'email address'
  return 'text'
}

/** Which processes refuse to start without it in staging and production. */
function requiredIn(variable: string): string {
  const roles = ROLES.filter((role) => (REQUIRED_IN_PRODUCTION[role] as readonly string[]).includes(variable))
  if (roles.length === 0) return '–'
  const condition = variable in REQUIRED_ONLY_WHEN ? ' (when `EMAIL_PROVIDERS` lists `ses`)' : ''
  return roles.map((role) => (role === 'cli' ? 'CLI' : role)).join(', ') + condition
}

const cell = (text: string) => text.replaceAll('\n', ' ')

/**
 * docs/configuration.md, from config/schema.ts (names, types, defaults, what production
 * requires) and config/variables.ts (who reads each and what it means). `npm run
 * docs:configuration` writes it; test/docs.configuration.test.ts keeps the file equal to this.
 */
export function configurationPage(): string {
  const properties = z.toJSONSchema(envSchema, { io: 'input', unrepresentable: 'any' }).properties as Record<string, JsonProperty>
  const rows = Object.entries(VARIABLES).map(([name, doc]) => {
    const property = properties[name] ?? {}
    const fallback =
      property.default !== undefined && property.default !== '' ? `\`${JSON.stringify(property.default).replace(/^"|"$/g, '')}\`` : '–'
    return `| \`${name}\` | ${typeOf(property)} | ${cell(doc.shownDefault ?? fallback)} | ${cell(doc.usedBy)} | ${requiredIn(name)} | ${cell(doc.meaning)} |`
  })
  return [
    '# Configuration',
    '',
    'Every environment variable Sealpost reads, its type, default and meaning. Generated from',
    '`config/schema.ts` and `config/variables.ts` by `npm run docs:configuration`: edit those, not this page',
    '(a test fails when they differ).',
    '',
    'Each process reads its environment once at startup and validates it; an invalid value stops the',
    'process with a message naming the variable, never its value. In `staging` and `production` a',
    'process also refuses to start without the settings the "required in production" column names',
    'for it: there is no embedded database or SES emulator there.',
    '',
    '| variable | type | default | used by | required in production | meaning |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    'Read by the libraries rather than by Sealpost: `PGSSLMODE` and `PGSSLROOTCERT` (libpq’s TLS',
    'settings, applied to every database URL without an `sslmode` of its own; Heroku sets',
    '`PGSSLMODE=require`; see [TLS to PostgreSQL](deploying.md#tls-to-postgresql)), and the standard AWS',
    'credential chain of the worker (`AWS_ACCESS_KEY_ID`, an instance role…).',
    '',
    "Generate a key with `node -e \"console.log(require('crypto').randomBytes(32).toString('base64'))\"` and",
    'give it an id: `OUTBOX_ENCRYPTION_KEYS=2026-12:<key>` (the id is written into every envelope; pick',
    'one you will recognise in the [rotation procedure](operations.md#rotating-keys)).',
    '',
  ].join('\n')
}
