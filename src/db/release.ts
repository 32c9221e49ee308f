import type { Config } from '../../config/schema.ts'
import type { Logger } from '../logging/logger.ts'
import { API_ROLE, WORKER_ROLE } from '../../migrations/20261130000100_roles.ts'
import { createBoss, installQueues } from './boss.ts'
import { createKnex } from './knex.ts'
import { MIGRATION_CONFIG } from './migrations.ts'

/**
 * pg-boss's tables change with its versions, so these grants are re-applied on every release
 * rather than frozen in a migration. The web may only insert jobs; the worker claims and settles.
 */
const PGBOSS_GRANTS = `
  GRANT USAGE ON SCHEMA pgboss TO ${API_ROLE}, ${WORKER_ROLE};
  GRANT SELECT ON ALL TABLES IN SCHEMA pgboss TO ${API_ROLE};
  DO $$ DECLARE part regclass; BEGIN
    FOR part IN SELECT 'pgboss.job'::regclass UNION SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass LOOP
      EXECUTE format('GRANT INSERT ON %s TO ${API_ROLE}', part);
    END LOOP;
  END $$;
  GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgboss TO ${WORKER_ROLE};
  GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgboss TO ${WORKER_ROLE};
`

/** The release step: knex migrations, pg-boss schema and queues, then role grants, as the owner. */
export async function release(ownerUrl: string, config: Pick<Config, 'LEASE_SECONDS'>, logger: Logger): Promise<void> {
  const started = Date.now()
  const db = createKnex(ownerUrl, { applicationName: 'sealpost-release', max: 2, logger })
  try {
    const [, applied] = (await db.migrate.latest(MIGRATION_CONFIG)) as [number, string[]]
    const boss = createBoss(ownerUrl, 'release', logger)
    await boss.start()
    try {
      await installQueues(boss, config)
    } finally {
      await boss.stop({ graceful: false })
    }
    await db.raw(PGBOSS_GRANTS)
    logger.info('release complete', { migrationsApplied: applied.length, durationMs: Date.now() - started })
  } finally {
    await db.destroy()
  }
}
