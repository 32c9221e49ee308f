import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.ts'
import { ensureLoginUsers } from '../../src/db/login-users.ts'
import { release } from '../../src/db/release.ts'
import { createLogger } from '../../src/logging/logger.ts'

/**
 * A PostgreSQL server of a test file's own, migrated and with its login users, for tests that
 * restart it or reconfigure it (TLS): the run's shared cluster is never touched.
 */
export type OwnCluster = {
  server: EmbeddedDatabase
  ownerUrl: string
  apiUrl: string
  workerUrl: string
  dataDir: string
  stop: () => Promise<void>
}

export async function startOwnCluster(options: { leaseSeconds?: number } = {}): Promise<OwnCluster> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'sealpost-own-'))
  // mkdtemp makes it 0700; as root, PostgreSQL runs as the `postgres` user and must get in.
  await chmod(dataDir, 0o755)
  const logger = createLogger({ level: 'error' })
  const server = await startEmbeddedPostgres({ dataDir, database: 'sealpost', logger, disposable: true })
  try {
    await release(server.ownerUrl, { LEASE_SECONDS: options.leaseSeconds ?? 60 }, logger)
    const { apiUrl, workerUrl } = await ensureLoginUsers(server.ownerUrl)
    return {
      server,
      ownerUrl: server.ownerUrl,
      apiUrl,
      workerUrl,
      dataDir,
      async stop() {
        await server.stop()
        await rm(dataDir, { recursive: true, force: true })
      },
    }
  } catch (error) {
    await server.stop()
    await rm(dataDir, { recursive: true, force: true })
    throw error
  }
}
