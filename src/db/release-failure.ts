import { SealpostError } from '../errors/sealpost-error.ts'

/** The release cannot go on; the message says what to do and holds no secret. */
export class ReleaseError extends SealpostError {
  override name = 'ReleaseError'
}

/**
 * What a failed release prints. PostgreSQL's own message (and hint) holds no secret and is what an
 * operator needs to see ("permission denied to create role"); its DETAIL is left out, since it can
 * quote row values. knex prefixes the message with the statement, which is cut away.
 */
export function describeReleaseFailure(error: unknown): string {
  const failure = error as { message?: unknown; code?: unknown; hint?: unknown; severity?: unknown }
  const code = typeof failure.code === 'string' ? failure.code : undefined
  const fromDatabase = typeof failure.severity === 'string'
  const text = typeof failure.message === 'string' ? failure.message : String(error)
  const message = fromDatabase && text.includes(' - ') ? text.slice(text.lastIndexOf(' - ') + 3) : text
  const lines = [`release failed: ${message}${code ? ` (${fromDatabase ? 'SQLSTATE ' : ''}${code})` : ''}`]
  if (fromDatabase && typeof failure.hint === 'string') lines.push(`hint from PostgreSQL: ${failure.hint}`)
  const remedy = remedyFor(code, message)
  if (remedy) lines.push(`what to do: ${remedy}`)
  return lines.join('\n')
}

function remedyFor(code: string | undefined, message: string): string | undefined {
  if (code === '42501') {
    return 'DATABASE_URL must be the database\'s owner (it creates schemas and grants on them). An owner without CREATEROLE needs SEALPOST_API_ROLE and SEALPOST_WORKER_ROLE naming two existing roles (docs/deploying.md "Heroku", "Database roles in production").'
  }
  if (code === '28P01' || code === '28000')
    return "DATABASE_URL's user, password or host is refused by the server: take the URL from the platform again (e.g. heroku config:get DATABASE_URL)."
  if (code === '3D000') return 'the database named in DATABASE_URL does not exist: create it, or correct the URL.'
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT')
    return 'the server in DATABASE_URL cannot be reached from here: check host, port and network.'
  if (/certificate|SSL|TLS/i.test(message))
    return 'the TLS handshake failed: set sslmode in DATABASE_URL as docs/deploying.md "TLS to PostgreSQL" says for your platform.'
  return undefined
}
