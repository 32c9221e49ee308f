import type { Config } from '../../config/schema.ts'
import type { Logger } from '../logging/logger.ts'
import { API_ROLE, WORKER_ROLE } from '../../migrations/20261130000100_roles.ts'
import { QUEUES } from '../outbox/constants.ts'
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

/**
 * Row-level security on pg-boss's job table and each of its partitions (pg-boss inserts into a
 * queue's partition directly), re-applied with the grants: the web may insert only a fresh job of
 * the delivery queue and see only that queue's rows, so it can neither file a job in the
 * dead-letter or maintenance queues nor forge a failed or active job (DESIGN §5, §7). The worker's
 * policy lets it do everything its grants allow; the owner, which owns the tables, is not subject
 * to row security. Web and worker logins refuse to start with BYPASSRLS (connection-guard.ts).
 */
const PGBOSS_ROW_POLICIES = `
  DO $$ DECLARE part regclass; BEGIN
    FOR part IN SELECT 'pgboss.job'::regclass UNION SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass LOOP
      EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', part);
      EXECUTE format('DROP POLICY IF EXISTS sealpost_web_enqueues_delivery ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_web_enqueues_delivery ON %s FOR INSERT TO ${API_ROLE} WITH CHECK (name = %L AND state = %L)', part, '${QUEUES.delivery}', 'created');
      EXECUTE format('DROP POLICY IF EXISTS sealpost_web_reads_delivery ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_web_reads_delivery ON %s FOR SELECT TO ${API_ROLE} USING (name = %L)', part, '${QUEUES.delivery}');
      EXECUTE format('DROP POLICY IF EXISTS sealpost_worker_jobs ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_worker_jobs ON %s FOR ALL TO ${WORKER_ROLE} USING (true) WITH CHECK (true)', part);
    END LOOP;
  END $$;
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
    await db.raw(PGBOSS_ROW_POLICIES)
    logger.info('release complete', { migrationsApplied: applied.length, durationMs: Date.now() - started })
  } finally {
    await db.destroy()
  }
}
