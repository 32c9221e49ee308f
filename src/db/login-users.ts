import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { withLibpqSslModes } from './connection-url.ts'
import { API_ROLE, WORKER_ROLE, type DatabaseRoles } from './roles.ts'
import { withCredentials } from './knex.ts'

export const API_LOGIN = 'sealpost_api_login'
export const WORKER_LOGIN = 'sealpost_worker_login'

/**
 * The embedded default's stand-in for an operator: login users that are members of the group
 * roles, with fresh random passwords on every start (nothing to store, nothing to leak).
 * Production creates these by hand, as docs/deploying.md "Database roles in production" shows.
 */
export async function ensureLoginUsers(
  ownerUrl: string,
  roles: Pick<DatabaseRoles, 'api' | 'worker'> = { api: API_ROLE, worker: WORKER_ROLE },
): Promise<{ apiUrl: string; workerUrl: string }> {
  const client = new pg.Client({ connectionString: withLibpqSslModes(ownerUrl) })
  await client.connect()
  try {
    const urls: string[] = []
    for (const [login, group] of [
      [API_LOGIN, roles.api],
      [WORKER_LOGIN, roles.worker],
    ] as const) {
      const password = randomBytes(24).toString('base64url')
      const exists = (await client.query('SELECT FROM pg_roles WHERE rolname = $1', [login])).rowCount === 1
      // Identifiers are constants and the password is base64url, so neither needs escaping.
      await client.query(
        exists
          ? `ALTER ROLE ${login} WITH LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '${password}'`
          : `CREATE ROLE ${login} WITH LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '${password}' IN ROLE ${group}`,
      )
      urls.push(withCredentials(ownerUrl, login, password))
    }
    return { apiUrl: urls[0]!, workerUrl: urls[1]! }
  } finally {
    await client.end()
  }
}
