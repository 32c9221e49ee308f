import type { Knex } from 'knex'
import { WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * One row per provider channel: a THROTTLED answer with a Retry-After pauses the channel for the
 * whole worker fleet until then, so one 429 does not become a hundred. Bounded by the channel
 * count, so it needs no retention rule.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE outbox.provider_pauses (
      channel text PRIMARY KEY CHECK (channel IN ('email', 'whatsapp')),
      paused_until timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    GRANT SELECT, INSERT, UPDATE ON outbox.provider_pauses TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE outbox.provider_pauses')
}
