import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import type { Config } from '../../config/schema.ts'
import type { Logger } from '../logging/logger.ts'
import { QUEUES } from './queues.ts'
import { captureJobInsert, createBoss, installQueues } from './boss.ts'
import { createKnex } from './knex.ts'
import { migrationConfigFor } from './migrations.ts'
import { ReleaseError } from './release-failure.ts'
import { databaseRoles, type DatabaseRoles } from './roles.ts'

/**
 * pg-boss's tables change with its versions, so these grants are re-applied on every release
 * rather than frozen in a migration. The web may only insert jobs: `boss.send(…, {db})` reads the
 * queue's settings (pgboss.queue, joined by the insert), checks the schema version at start
 * (pgboss.version) and gets `RETURNING id, start_after` back from the insert, and nothing more —
 * measured in test/roles.test.ts. The worker claims and settles.
 */
function pgbossGrants({ api, worker }: DatabaseRoles): string {
  return `
  GRANT USAGE ON SCHEMA pgboss TO ${api}, ${worker};
  REVOKE SELECT ON ALL TABLES IN SCHEMA pgboss FROM ${api};
  GRANT SELECT ON pgboss.version, pgboss.queue TO ${api};
  DO $$ DECLARE part regclass; BEGIN
    FOR part IN SELECT 'pgboss.job'::regclass UNION SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass LOOP
      EXECUTE format('GRANT INSERT, SELECT (id, start_after) ON %s TO ${api}', part);
    END LOOP;
  END $$;
  GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgboss TO ${worker};
  GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgboss TO ${worker};
`
}

/** What to run when the owner may not create the group roles: the message of the failed release. */
function createRoleRemedy(owner: string): string {
  return [
    `release: the owner role ${owner} (DATABASE_URL) may not create roles (no CREATEROLE), and neither SEALPOST_API_ROLE nor SEALPOST_WORKER_ROLE is set.`,
    'Managed PostgreSQL (Heroku Postgres Standard and above, and the like) creates login roles for you. Make two, name them to the release step, and run it again:',
    '  heroku pg:credentials:create DATABASE --name sealpost_web',
    '  heroku pg:credentials:create DATABASE --name sealpost_worker',
    '  heroku addons:attach <database add-on> --credential sealpost_web --as API_DATABASE',
    '  heroku addons:attach <database add-on> --credential sealpost_worker --as WORKER_DATABASE',
    '  heroku config:set SEALPOST_API_ROLE=sealpost_web SEALPOST_WORKER_ROLE=sealpost_worker',
    '  (each role is the user= that heroku pg:credentials:url DATABASE --name <credential> shows; Essential plans have no extra credentials)',
    "Elsewhere, create the two group roles once as a role that may (e.g. the platform's admin user), then set SEALPOST_API_ROLE=sealpost_api SEALPOST_WORKER_ROLE=sealpost_worker:",
    '  CREATE ROLE sealpost_api NOLOGIN; CREATE ROLE sealpost_worker NOLOGIN;',
    '(docs/deploying.md walks through both.)',
  ].join('\n')
}

/**
 * Before anything changes: either the owner may create the group roles, or both named roles exist,
 * are not the owner, and have no more power than a web or worker login may have.
 */
async function checkRoles(db: Knex, roles: DatabaseRoles): Promise<void> {
  const {
    rows: [owner],
  } = await db.raw<{ rows: { rolname: string; rolsuper: boolean; rolcreaterole: boolean }[] }>(
    'SELECT rolname, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user',
  )
  if (!owner) throw new ReleaseError('release: the DATABASE_URL role cannot be inspected')
  if (!roles.named) {
    if (!owner.rolsuper && !owner.rolcreaterole) throw new ReleaseError(createRoleRemedy(owner.rolname))
    return
  }
  const { rows } = await db.raw<{ rows: { rolname: string; rolsuper: boolean; rolbypassrls: boolean }[] }>(
    'SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = ANY(?)',
    [[roles.api, roles.worker]],
  )
  for (const [variable, name] of [
    ['SEALPOST_API_ROLE', roles.api],
    ['SEALPOST_WORKER_ROLE', roles.worker],
  ] as const) {
    const role = rows.find((row) => row.rolname === name)
    if (!role)
      throw new ReleaseError(
        `release: ${variable} names the role ${name}, which does not exist on this server; create it first (heroku pg:credentials:create DATABASE --name ${name}, or CREATE ROLE ${name} LOGIN PASSWORD '…' as a role that may)`,
      )
    if (name === owner.rolname)
      throw new ReleaseError(
        `release: ${variable} names the owner role ${name} itself; name a separate role (the owner must not be what web or worker connect as)`,
      )
    if (role.rolsuper || role.rolbypassrls)
      throw new ReleaseError(`release: ${variable} names ${name}, a superuser or BYPASSRLS role; name a role without them`)
  }
}

/**
 * Before migrating an installed database, and after the grants: a database installed for other roles (e.g. first released with the group
 * roles, now with named ones) would leave the named roles without the grants of the older
 * migrations. Stop and say how to carry them over instead of starting processes that fail later.
 */
async function checkGrantsLanded(db: Knex, roles: DatabaseRoles): Promise<void> {
  const {
    rows: [landed],
  } = await db.raw<{ rows: { api: boolean; worker: boolean }[] }>(
    `SELECT has_table_privilege(?, 'identity.challenges', 'INSERT') AS api,
            has_table_privilege(?, 'outbox.security_outbox_ciphertexts', 'DELETE') AS worker`,
    [roles.api, roles.worker],
  )
  if (landed?.api && landed.worker) return
  throw new ReleaseError(
    `release: this database's earlier migrations granted to other roles than ${roles.api} / ${roles.worker}. ` +
      'Make the roles members of the roles it was installed for, as a role that may, e.g. ' +
      `GRANT sealpost_api TO ${roles.api}; GRANT sealpost_worker TO ${roles.worker}; then run the release again.`,
  )
}

/**
 * Row-level security on pg-boss's job table and each of its partitions (pg-boss inserts into a
 * queue's partition directly), re-applied with the grants: the web may insert only a fresh job of
 * the delivery queue and see only that queue's rows, so it can neither file a job in the
 * crash-loop or maintenance queues nor forge a failed or active job (docs/architecture.md §6). The worker's
 * policy lets it do everything its grants allow; the owner, which owns the tables, is not subject
 * to row security. Web and worker logins refuse to start with BYPASSRLS (connection-guard.ts).
 */
function pgbossRowPolicies({ api, worker }: DatabaseRoles): string {
  return `
  DO $$ DECLARE part regclass; BEGIN
    FOR part IN SELECT 'pgboss.job'::regclass UNION SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass LOOP
      EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', part);
      EXECUTE format('DROP POLICY IF EXISTS sealpost_web_enqueues_delivery ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_web_enqueues_delivery ON %s FOR INSERT TO ${api} WITH CHECK (name = %L AND state = %L)', part, '${QUEUES.delivery}', 'created');
      EXECUTE format('DROP POLICY IF EXISTS sealpost_web_reads_delivery ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_web_reads_delivery ON %s FOR SELECT TO ${api} USING (name = %L)', part, '${QUEUES.delivery}');
      EXECUTE format('DROP POLICY IF EXISTS sealpost_worker_jobs ON %s', part);
      EXECUTE format('CREATE POLICY sealpost_worker_jobs ON %s FOR ALL TO ${worker} USING (true) WITH CHECK (true)', part);
    END LOOP;
  END $$;
`
}

/**
 * `outbox.insert_delivery_job(json)`: pg-boss's own INSERT of a delivery job, exactly as the
 * installed pg-boss writes it for `boss.send`, in a PL/pgSQL function, so `outbox.enqueue_message`
 * inserts the job in the same call as its message, with a plan cached per connection (planning
 * pg-boss's statement on every enqueue cost about a third of the database's CPU per request:
 * bench/HISTORY.md "The enqueue round"), and without restating pg-boss's SQL. Re-created on
 * every release, like the grants: it follows pg-boss's version. SECURITY INVOKER: the web's own
 * grants and row policies on pgboss.job apply. With it, `outbox.notify_delivery_workers()`: that
 * statement's NOTIFY alone.
 */
function deliveryJobFunction(insertSql: string, { api }: DatabaseRoles): string {
  const body = insertSql.replace(/\$1(?!\d)/g, 'p_job_json')
  if (body === insertSql || /\$\d|\$fn\$|\?/.test(body))
    throw new Error('release: pg-boss’s job insert is not the one-parameter statement expected')
  return `
  CREATE OR REPLACE FUNCTION outbox.insert_delivery_job(p_job_json text) RETURNS uuid
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
  DECLARE
    inserted record;
  BEGIN
    FOR inserted IN ${body} LOOP
      RETURN inserted.id;
    END LOOP;
    RETURN NULL;
  END $fn$;
  REVOKE ALL ON FUNCTION outbox.insert_delivery_job(text) FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION outbox.insert_delivery_job(text) TO ${api};
  CREATE OR REPLACE FUNCTION outbox.notify_delivery_workers() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
  BEGIN
    PERFORM ${notifyOf(insertSql)};
  END $fn$;
  REVOKE ALL ON FUNCTION outbox.notify_delivery_workers() FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION outbox.notify_delivery_workers() TO ${api};`
}

/**
 * The notification pg-boss's insert sends for an immediately runnable job (`pg_notify(<channel>,
 * '<queue>')`), cut from the same captured statement: what a rehearsal's rolled-back job would have
 * sent (`identity.issue_challenge`).
 */
function notifyOf(insertSql: string): string {
  const start = insertSql.indexOf('pg_notify(')
  const end = insertSql.indexOf(`, '${QUEUES.delivery}')`, start)
  if (start < 0 || end < 0)
    throw new Error('release: pg-boss’s job insert sends no notification for the delivery queue (is its queue notify-enabled?)')
  return `${insertSql.slice(start, end)}, '${QUEUES.delivery}')`
}

/** The release step: knex migrations, pg-boss schema and queues, then role grants, as the owner. */
export async function release(
  ownerUrl: string,
  config: Pick<Config, 'LEASE_SECONDS' | 'SEALPOST_API_ROLE' | 'SEALPOST_WORKER_ROLE'>,
  logger: Logger,
): Promise<void> {
  const started = Date.now()
  const roles = databaseRoles(config)
  const db = createKnex(ownerUrl, { applicationName: 'sealpost-release', max: 2, logger })
  try {
    await checkRoles(db, roles)
    // An installed database is checked before anything changes, too.
    if ((await db.raw("SELECT to_regclass('outbox.security_outbox_ciphertexts') IS NOT NULL AS installed")).rows[0].installed)
      await checkGrantsLanded(db, roles)
    const [, applied] = (await db.migrate.latest(migrationConfigFor(roles))) as [number, string[]]
    const boss = createBoss(ownerUrl, 'release', logger)
    await boss.start()
    try {
      await installQueues(boss, config)
      const { sql } = await captureJobInsert(boss, QUEUES.delivery, {}, randomUUID())
      await db.raw(deliveryJobFunction(sql, roles))
    } finally {
      await boss.stop({ graceful: false })
    }
    await db.raw(pgbossGrants(roles))
    await db.raw(pgbossRowPolicies(roles))
    await checkGrantsLanded(db, roles)
    logger.info('release complete', {
      migrationsApplied: applied.length,
      apiRole: roles.api,
      workerRole: roles.worker,
      durationMs: Date.now() - started,
    })
  } finally {
    await db.destroy()
  }
}
