import type { Knex } from 'knex'
import { WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * For the schedules (DESIGN §6): each message names its current pg-boss job, so the expiry purge
 * can cancel it; the worker may delete terminal messages (retention, cascading to attempts and
 * dead letters) and expired rate-limit hits.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_messages ADD COLUMN job_id uuid;
    GRANT DELETE ON outbox.security_outbox_messages TO ${WORKER_ROLE};
    GRANT USAGE ON SCHEMA platform TO ${WORKER_ROLE};
    GRANT SELECT, DELETE ON platform.rate_limit_hits TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE SELECT, DELETE ON platform.rate_limit_hits FROM ${WORKER_ROLE};
    REVOKE USAGE ON SCHEMA platform FROM ${WORKER_ROLE};
    REVOKE DELETE ON outbox.security_outbox_messages FROM ${WORKER_ROLE};
    ALTER TABLE outbox.security_outbox_messages DROP COLUMN job_id;
  `)
}
