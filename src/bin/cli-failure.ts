import { ConfigError } from '../../config/schema.ts'
import { describeError } from '../logging/logger.ts'

// Nothing answers where the helper looked: the database `npm start` runs, DATABASE_URL, or the API.
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ETIMEDOUT', '57P03'])
// PostgreSQL's invalid_password and invalid_authorization_specification; invalid_catalog_name.
const LOGIN_REFUSED = new Set(['28P01', '28000'])
const NO_DATABASE = '3D000'

/** The code of an error or of its cause (fetch reports a refused connection as the cause of a TypeError). */
function codeOf(error: unknown): string | undefined {
  const own = describeError(error).errorCode
  if (own) return own
  const cause = (error as { cause?: unknown } | null)?.cause
  return cause === undefined ? undefined : describeError(cause).errorCode
}

/**
 * What a failed developer or operator helper (`npm run staff`, `people`, `dev:identity`,
 * `dev:message`, `dev:ses-event`, `preview`) prints: one line saying what went wrong and what to
 * do, never a stack trace. As in logs, only error names, codes and the messages we wrote ourselves
 * (`safe`): a driver's message may quote a URL with its password.
 */
export function describeCliFailure(error: unknown, options: { safe: boolean; dataDir: string }): string {
  if (error instanceof ConfigError) {
    return `invalid configuration: ${error.message.replace(/^Invalid configuration:\n\s*- /, '').replace(/\n\s*- /g, '; ')}`
  }
  if (options.safe && error instanceof Error) return error.message.replace(/\s*\n\s*/g, ' ')
  const code = codeOf(error)
  const startIt = `is \`npm start\` running on ${options.dataDir}? Start it there (or set DATABASE_URL to the owner's URL) and try again`
  if (code && UNREACHABLE.has(code)) return `nothing answers at the database or API this helper uses (${code}): ${startIt}`
  if (code && LOGIN_REFUSED.has(code))
    return `the database refused the login (${code}): ${startIt}; DATABASE_URL, if set, must be the owner's`
  if (code === NO_DATABASE) return `the database is not there (${code}): ${startIt}`
  const { errorName } = describeError(error)
  return `unexpected failure (${[errorName, code].filter(Boolean).join(' ')}); please report this line with the command you ran`
}
