import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { startEmbeddedPostgres } from '../db/embedded.ts'
import { ensureLoginUsers } from '../db/login-users.ts'
import { databaseRoles } from '../db/roles.ts'
import { release } from '../db/release.ts'
import type { Logger } from '../logging/logger.ts'
import type { Config } from '../providers/config.ts'
import { createPhoneInbox, type PhoneInbox } from '../providers/phone-inbox.ts'
import { providersFromConfig, startDevFakes } from '../providers/wiring.ts'
import { ensureDevKeys, keysFromRings, type Keys } from './dev-keys.ts'
import { startWeb } from './web.ts'
import { startWorker } from './worker.ts'

export type DevStack = {
  apiUrl: string
  apiBound: string
  inboxUrl: string | null
  /** What the local phone-provider fakes accepted (the phone inbox view). */
  phoneInbox: PhoneInbox
  stop: () => Promise<void>
}

/** Where `npm run dev:identity` finds the embedded database `npm start` is running. */
export function runtimeFile(dataDir: string): string {
  return path.join(dataDir, 'runtime.json')
}

/**
 * `npm start`: embedded PostgreSQL unless DATABASE_URL is set, the release step, each provider's
 * local fake where it is not configured (src/providers/wiring.ts `startDevFakes`), then web and
 * worker in this one process, each on its own role.
 */
export async function startDevStack(config: Config, logger: Logger): Promise<DevStack> {
  const stops: (() => Promise<void>)[] = []
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
  }
  try {
    let ownerUrl = config.DATABASE_URL
    if (!ownerUrl) {
      const embedded = await startEmbeddedPostgres({ dataDir: config.SEALPOST_DATA_DIR, database: 'sealpost', logger })
      stops.push(embedded.stop)
      ownerUrl = embedded.ownerUrl
      await writeFile(runtimeFile(config.SEALPOST_DATA_DIR), JSON.stringify({ databaseUrl: ownerUrl }), { mode: 0o600 })
    }
    const keys: Keys =
      config.OUTBOX_ENCRYPTION_KEYS && config.CODE_HASH_KEYS
        ? keysFromRings(config.OUTBOX_ENCRYPTION_KEYS, config.CODE_HASH_KEYS)
        : await ensureDevKeys(config.SEALPOST_DATA_DIR)
    await release(ownerUrl, config, logger)
    const { apiUrl, workerUrl } =
      config.API_DATABASE_URL && config.WORKER_DATABASE_URL
        ? { apiUrl: config.API_DATABASE_URL, workerUrl: config.WORKER_DATABASE_URL }
        : await ensureLoginUsers(ownerUrl, databaseRoles(config))

    // The local phone fakes record into it; the web shows it (development only, this machine only).
    const phoneInbox = createPhoneInbox()
    // Each provider that is not configured runs its local fake (src/providers/<name>/index.ts `dev`).
    const fakes = await startDevFakes(config, phoneInbox, logger)
    stops.push(fakes.stop)
    const workerConfig = { ...config, ...fakes.worker }
    const providers = providersFromConfig(workerConfig)
    stops.push(async () => providers.forEach((provider) => provider.close()))
    const worker = await startWorker({ config: workerConfig, workerUrl, keys, providers, logger })
    stops.push(worker.stop)
    const webConfig = { ...config, ...fakes.web }
    const web = await startWeb({ config: webConfig, apiUrl, keys, logger, developmentPages: { inboxUrl: fakes.inboxUrl, phoneInbox } })
    stops.push(web.stop)
    fakes.webStarted(web.url)
    if (!config.DATABASE_URL)
      await writeFile(
        runtimeFile(config.SEALPOST_DATA_DIR),
        JSON.stringify({ databaseUrl: ownerUrl, apiUrl: web.url, sesEventsTopicArn: webConfig.SES_EVENTS_TOPIC_ARN }),
        { mode: 0o600 },
      )
    const inboxUrl = fakes.inboxUrl
    return { apiUrl: web.url, apiBound: web.bound, inboxUrl, phoneInbox, stop: stopAll }
  } catch (error) {
    await stopAll()
    throw error
  }
}
