import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Least privilege (DESIGN §7): the web writes identity rows and INSERTs outbox rows; the worker
 * reads only what delivery needs and never sees identity secrets. pg-boss grants are applied by the
 * release step after pg-boss installs its schema (src/db/release.ts).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE ALL ON SCHEMA identity, outbox FROM PUBLIC;
    REVOKE ALL ON ALL FUNCTIONS IN SCHEMA outbox FROM PUBLIC;

    GRANT USAGE ON SCHEMA identity, outbox TO ${API_ROLE}, ${WORKER_ROLE};

    GRANT SELECT, INSERT, UPDATE ON identity.identities, identity.login_identifiers,
      identity.password_credentials, identity.challenges TO ${API_ROLE};
    GRANT INSERT ON outbox.security_outbox_messages, outbox.security_outbox_ciphertexts TO ${API_ROLE};

    GRANT SELECT (id, expires_at, consumed_at, revoked_at) ON identity.challenges TO ${WORKER_ROLE};
    GRANT SELECT, UPDATE ON outbox.security_outbox_messages TO ${WORKER_ROLE};
    GRANT SELECT, DELETE ON outbox.security_outbox_ciphertexts TO ${WORKER_ROLE};
    GRANT SELECT, INSERT ON outbox.security_outbox_attempts, outbox.security_outbox_dead_letters TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE ALL ON ALL TABLES IN SCHEMA identity, outbox FROM ${API_ROLE}, ${WORKER_ROLE};
    REVOKE ALL ON SCHEMA identity, outbox FROM ${API_ROLE}, ${WORKER_ROLE};
  `)
}
