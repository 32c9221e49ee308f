import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres } from '../../src/db/embedded.ts'
import { withCredentials } from '../../src/db/knex.ts'
import { ensureLoginUsers } from '../../src/db/login-users.ts'
import { release } from '../../src/db/release.ts'
import { createLogger } from '../../src/logging/logger.ts'

/** The PostgreSQL server of this test run: embedded, or TEST_DATABASE_URL's. */
export type TestCluster = {
  /** URL of `database` on this server as the owner (a role that may create databases and roles). */
  ownerUrl: (database: string) => string
  /** The api/worker login passwords of this run (login roles are cluster-wide). */
  logins: { api: { user: string; password: string }; worker: { user: string; password: string } }
  stop: () => Promise<void>
}

export const TEMPLATE_DATABASE = 'sealpost_test_template'
const quietLogger = createLogger({ level: 'error' })

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** Starts the server once per run and migrates a template database every test file copies. */
export async function startTestCluster(): Promise<TestCluster> {
  let ownerUrl: (database: string) => string
  let stopServer: () => Promise<void>
  if (process.env.TEST_DATABASE_URL) {
    const base = process.env.TEST_DATABASE_URL
    ownerUrl = (database) => {
      const url = new URL(base)
      url.pathname = `/${database}`
      return url.toString()
    }
    stopServer = async () => {}
  } else {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'sealpost-test-'))
    // mkdtemp makes it 0700; as root, PostgreSQL runs as the `postgres` user and must get in.
    await chmod(dataDir, 0o755)
    const embedded = await startEmbeddedPostgres({ dataDir, database: 'postgres', logger: quietLogger, disposable: true })
    ownerUrl = embedded.serverUrl
    stopServer = async () => {
      await embedded.stop()
      await rm(dataDir, { recursive: true, force: true })
    }
  }
  await adminQuery(ownerUrl('postgres'), `DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE} WITH (FORCE)`)
  await adminQuery(ownerUrl('postgres'), `CREATE DATABASE ${TEMPLATE_DATABASE}`)
  await release(ownerUrl(TEMPLATE_DATABASE), { LEASE_SECONDS: 60 }, quietLogger)
  const { apiUrl, workerUrl } = await ensureLoginUsers(ownerUrl(TEMPLATE_DATABASE))
  const credentials = (url: string) => {
    const parsed = new URL(url)
    return { user: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) }
  }
  return {
    ownerUrl,
    logins: { api: credentials(apiUrl), worker: credentials(workerUrl) },
    async stop() {
      await adminQuery(ownerUrl('postgres'), `DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE} WITH (FORCE)`).catch(() => undefined)
      await stopServer()
    },
  }
}

/** Same server and database, another login. */
export function asLogin(url: string, login: { user: string; password: string }): string {
  return withCredentials(url, login.user, login.password)
}
