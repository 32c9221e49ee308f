import { createHash } from 'node:crypto'
import type { Knex } from 'knex'
import type { CoreConfig } from '../../config/schema.ts'
import type { Logger } from '../logging/logger.ts'
import { QUEUES } from './queues.ts'
import { createBoss, installQueues } from './boss.ts'
import { defineDeliveryJobFunctions } from './delivery-job-functions.ts'
import { createKnex } from './knex.ts'
import { migrationConfigFor } from './migrations.ts'
import { ReleaseError } from './release-failure.ts'
import { databaseRoles, type DatabaseRoles } from './roles.ts'
import { withTransientRetry, type RetryPolicy } from './transient.ts'

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
 * How the release step takes the locks it must while the previous release's web and worker run:
 * every statement of its connections waits at most `lockTimeoutMs` for a lock (then 55P03, instead
 * of queueing the traffic behind its request), and a step that timed out or deadlocked is tried
 * again in a new transaction (docs/operations.md "What the release step locks").
 *
 * The wait is well below PostgreSQL's `deadlock_timeout` (1 s by default) on purpose: PostgreSQL
 * ends a deadlock by failing the transaction whose wait reached `deadlock_timeout` first. A release
 * that waited longer could outwait a live request caught in a cycle with it, and the request
 * would be the one to fail; one that gives up first always fails itself, releases its locks, and
 * tries again, so the previous release's traffic never pays for a release.
 */
export const RELEASE_LOCKS: { lockTimeoutMs: number } & RetryPolicy = Object.freeze({
  lockTimeoutMs: 200,
  attempts: 20,
  minDelayMs: 200,
  maxDelayMs: 2_000,
})

/**
 * Row-level security on pg-boss's job table and each of its partitions (pg-boss inserts into a
 * queue's partition directly): the web may insert only a fresh job of the delivery queue, whose
 * dead letter is that queue's crash-loop queue or none, and see only that queue's rows, so it can
 * neither file a job in the crash-loop, events-out or maintenance queues (itself or through a
 * failed job's dead letter) nor forge a failed or active job (docs/architecture.md §6). The
 * worker's policy lets it do everything its grants allow; the owner, which owns the tables, is not
 * subject to row security. Web and worker logins refuse to start with BYPASSRLS (connection-guard.ts).
 */
function pgbossPolicies({ api, worker }: DatabaseRoles): { name: string; clause: string }[] {
  const queue = `'${QUEUES.delivery}'`
  // The worker's login moves a job that failed past its retries to the queue its dead_letter names:
  // any other queue there would file, through the worker, a job the web may not file itself.
  const deadLetter = `(dead_letter IS NULL OR dead_letter = '${QUEUES.crashLoop}')`
  return [
    {
      name: 'sealpost_web_enqueues_delivery',
      clause: `FOR INSERT TO ${api} WITH CHECK (name = ${queue} AND state = 'created' AND ${deadLetter})`,
    },
    { name: 'sealpost_web_reads_delivery', clause: `FOR SELECT TO ${api} USING (name = ${queue})` },
    { name: 'sealpost_worker_jobs', clause: `FOR ALL TO ${worker} USING (true) WITH CHECK (true)` },
  ]
}

/** Written as each policy's comment: what it was created from, so a later release can tell it is still the one wanted. */
const policyMark = (clause: string) => `sealpost ${createHash('sha256').update(clause).digest('hex').slice(0, 16)}`

/**
 * What must change for row security on pgboss.job and each partition, read from the catalogs
 * before any DDL: a relation without row security, or a policy missing or not marked as created
 * from today's definition (roles, queue). pg-boss's statements lock a partition then its parent,
 * so DDL here (AccessExclusiveLock) beside live traffic can deadlock: a release with nothing to
 * change must take none (on Heroku every `config:set` runs the release step).
 */
async function pgbossPolicyChanges(db: Knex, roles: DatabaseRoles): Promise<{ relation: string; statements: string[] }[]> {
  const { rows } = await db.raw<{ rows: { relation: string; row_security: boolean; marks: Record<string, string | null> }[] }>(
    `SELECT c.oid::regclass::text AS relation, c.relrowsecurity AS row_security,
            coalesce(jsonb_object_agg(p.polname, obj_description(p.oid, 'pg_policy')) FILTER (WHERE p.oid IS NOT NULL), '{}') AS marks
       FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid
      WHERE c.oid = 'pgboss.job'::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'pgboss.job'::regclass)
      GROUP BY c.oid, c.relrowsecurity
      ORDER BY c.oid = 'pgboss.job'::regclass, 1`,
  )
  const wanted = pgbossPolicies(roles)
  return rows
    .map(({ relation, row_security, marks }) => ({
      relation,
      statements: [
        ...(row_security ? [] : [`ALTER TABLE ${relation} ENABLE ROW LEVEL SECURITY`]),
        ...wanted
          .filter(({ name, clause }) => marks[name] !== policyMark(clause))
          .flatMap(({ name, clause }) => [
            `DROP POLICY IF EXISTS ${name} ON ${relation}`,
            `CREATE POLICY ${name} ON ${relation} ${clause}`,
            `COMMENT ON POLICY ${name} ON ${relation} IS '${policyMark(clause)}'`,
          ]),
      ],
    }))
    .filter(({ statements }) => statements.length > 0)
}

/**
 * Applies what differs, one relation per transaction (never a partition's lock held while waiting
 * for the parent's, the order that deadlocks with pg-boss), each under the release's lock timeout
 * and retried on a timeout or deadlock (RELEASE_LOCKS). Partitions first, the parent last.
 */
async function applyPgbossRowPolicies(db: Knex, roles: DatabaseRoles, logger: Logger): Promise<number> {
  const changes = await pgbossPolicyChanges(db, roles)
  for (const { relation, statements } of changes) {
    await withTransientRetry(
      db,
      (runner) =>
        runner.transaction(async (trx) => {
          for (const statement of statements) await trx.raw(statement)
        }),
      { logger, what: `release: row security on ${relation}`, policy: RELEASE_LOCKS },
    )
    logger.info('release: row security applied', { relation, statements: statements.length })
  }
  return changes.length
}

/** The release step: knex migrations, pg-boss schema and queues, then role grants, as the owner. */
export async function release(
  ownerUrl: string,
  config: Pick<CoreConfig, 'LEASE_SECONDS' | 'SEALPOST_API_ROLE' | 'SEALPOST_WORKER_ROLE'>,
  logger: Logger,
): Promise<void> {
  const started = Date.now()
  const roles = databaseRoles(config)
  const db = createKnex(ownerUrl, { applicationName: 'sealpost-release', max: 2, logger, lockTimeoutMs: RELEASE_LOCKS.lockTimeoutMs })
  const retried = { logger, policy: RELEASE_LOCKS }
  try {
    await checkRoles(db, roles)
    // An installed database is checked before anything changes, too.
    if ((await db.raw("SELECT to_regclass('outbox.security_outbox_ciphertexts') IS NOT NULL AS installed")).rows[0].installed)
      await checkGrantsLanded(db, roles)
    // Each migration commits on its own: after a lock timeout or deadlock, the next try applies what is left.
    const [, applied] = await withTransientRetry(
      db,
      async (runner) => (await runner.migrate.latest(migrationConfigFor(roles))) as [number, string[]],
      { ...retried, what: 'release: migrations' },
    )
    const boss = createBoss(ownerUrl, 'release', logger)
    await boss.start()
    try {
      await installQueues(boss, config)
      await defineDeliveryJobFunctions(db, boss, roles, logger)
    } finally {
      await boss.stop({ graceful: false })
    }
    await withTransientRetry(db, (runner) => runner.raw(pgbossGrants(roles)), { ...retried, what: 'release: pg-boss grants' })
    const rowSecurityChanged = await applyPgbossRowPolicies(db, roles, logger)
    await checkGrantsLanded(db, roles)
    logger.info('release complete', {
      migrationsApplied: applied.length,
      rowSecurityChanged,
      apiRole: roles.api,
      workerRole: roles.worker,
      durationMs: Date.now() - started,
    })
  } finally {
    await db.destroy()
  }
}
