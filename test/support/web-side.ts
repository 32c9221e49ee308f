import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { createBoss } from '../../src/db/boss.ts'
import { createKnex } from '../../src/db/knex.ts'
import type { ChallengeDeps } from '../../src/identity/password-recovery.ts'
import type { Logger } from '../../src/logging/logger.ts'
import { createTestDatabase, type TestDatabase } from './database.ts'
import type { testKeys } from './helpers.ts'

/** The web side alone (no worker): a fresh database, the api login's pool and a web pg-boss. */
export type WebSide = { db: TestDatabase; api: Knex; boss: PgBoss; close(): Promise<void> }

export async function openWebSide(logger: Logger): Promise<WebSide> {
  const db = await createTestDatabase()
  const api = createKnex(db.apiUrl, { applicationName: 'test-api' })
  const boss = createBoss(db.apiUrl, 'web', logger)
  await boss.start()
  return {
    db,
    api,
    boss,
    async close() {
      await boss.stop({ graceful: false })
      await api.destroy()
      await db.drop()
    },
  }
}

/** What the web's enqueue needs, on this side's boss and keys (both channels on). */
export function webChallengeDeps(
  boss: PgBoss,
  keys: ReturnType<typeof testKeys>,
  logger: Logger,
  extra: Partial<ChallengeDeps> = {},
): ChallengeDeps {
  return {
    boss,
    outboxKey: keys.outboxKey,
    codeHashKey: keys.codeHashKey,
    challengeTtlSeconds: 600,
    clock: () => new Date(),
    logger,
    channels: new Set(['email', 'whatsapp']),
    ...extra,
  }
}
