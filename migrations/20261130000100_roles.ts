import type { Knex } from 'knex'

/**
 * The two NOLOGIN group roles of DESIGN §7. Roles are cluster-wide, so creation is idempotent and
 * `down` leaves them: another database on the same server may still grant to them.
 */
export const API_ROLE = 'sealpost_api'
export const WORKER_ROLE = 'sealpost_worker'

export async function up(knex: Knex): Promise<void> {
  for (const role of [API_ROLE, WORKER_ROLE]) {
    await knex.raw(`
      DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${role}') THEN
          CREATE ROLE ${role} NOLOGIN;
        END IF;
      END $$`)
  }
}

export async function down(): Promise<void> {}
