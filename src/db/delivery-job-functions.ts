import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { Logger } from '../logging/logger.ts'
import { captureJobInsert, notificationOf } from './boss.ts'
import { QUEUES } from './queues.ts'
import type { DatabaseRoles } from './roles.ts'

/** The release's step: pg-boss's job insert as the started `boss` writes it, compiled into the functions below. */
export async function defineDeliveryJobFunctions(db: Knex, boss: PgBoss, roles: DatabaseRoles, logger: Logger): Promise<void> {
  const { sql } = await captureJobInsert(boss, QUEUES.delivery, {}, randomUUID())
  await defineFunctions(db, deliveryJobFunctions(sql, roles), logger)
}

/**
 * `outbox.insert_delivery_job(json)`: pg-boss's own INSERT of a delivery job, exactly as the
 * installed pg-boss writes it for `boss.send`, in a PL/pgSQL function, so `outbox.enqueue_message`
 * inserts the job in the same call as its message, with a plan cached per connection (planning
 * pg-boss's statement on every enqueue is a large share of the database's CPU per request;
 * docs/performance.md), and without restating pg-boss's SQL. Re-created on
 * every release that finds it differs from the installed pg-boss's (`defineFunctions`): it follows
 * pg-boss's version. SECURITY INVOKER: the web's own grants and row policies on pgboss.job apply.
 * With it, `outbox.notify_delivery_workers()`: that statement's NOTIFY alone (what a rehearsal's
 * rolled-back job would have sent, `identity.issue_challenge`).
 */
function deliveryJobFunctions(insertSql: string, { api }: DatabaseRoles): DefinedFunction[] {
  const body = insertSql.replace(/\$1(?!\d)/g, 'p_job_json')
  if (body === insertSql || /\$\d|\$fn\$|\?/.test(body))
    throw new Error('release: pg-boss’s job insert is not the one-parameter statement expected')
  return [
    {
      signature: 'outbox.insert_delivery_job(text)',
      header: 'outbox.insert_delivery_job(p_job_json text) RETURNS uuid',
      source: `
  DECLARE
    inserted record;
  BEGIN
    FOR inserted IN ${body} LOOP
      RETURN inserted.id;
    END LOOP;
    RETURN NULL;
  END `,
      grantee: api,
    },
    {
      signature: 'outbox.notify_delivery_workers()',
      header: 'outbox.notify_delivery_workers() RETURNS void',
      source: `
  BEGIN
    PERFORM ${notificationOf(insertSql, QUEUES.delivery).call};
  END `,
      grantee: api,
    },
  ]
}

type DefinedFunction = { signature: string; header: string; source: string; grantee: string }

/**
 * Re-creates a function only when its source or its grantee's EXECUTE differs from what is
 * wanted: replacing it unchanged would still invalidate every connection's cached plans of it.
 */
async function defineFunctions(db: Knex, functions: DefinedFunction[], logger: Logger): Promise<void> {
  for (const fn of functions) {
    const {
      rows: [installed],
    } = await db.raw<{ rows: { source: string | null; granted: boolean | null }[] }>(
      `SELECT p.prosrc AS source, has_function_privilege(?, p.oid, 'EXECUTE') AS granted
         FROM (SELECT to_regprocedure(?) AS oid) wanted LEFT JOIN pg_proc p ON p.oid = wanted.oid`,
      [fn.grantee, fn.signature],
    )
    if (installed?.source === fn.source && installed.granted) continue
    await db.raw(`
  CREATE OR REPLACE FUNCTION ${fn.header}
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$${fn.source}$fn$;
  REVOKE ALL ON FUNCTION ${fn.signature} FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION ${fn.signature} TO ${fn.grantee};`)
    logger.info('release: function defined', { function: fn.signature })
  }
}
