import type { Knex } from 'knex'
import { WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * The fleet-wide send caps (a global guard on sending): one counter row per channel and
 * clock hour (`scope` ''), and per phone country calling code (`scope` its digits), which every
 * worker bumps once per claimed batch in one statement under the row's lock, so the whole fleet
 * agrees on what the hour has sent. `granted` and `first_hold` are what the last statement decided
 * (read back by it through RETURNING); `held_at` is when the cap first held a message back this
 * hour. The worker deletes a scope's rows older than the previous hour when it opens a new one, so
 * the table holds two rows per scope at most and needs no retention rule. A new table: the previous
 * release never reads it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE outbox.send_windows (
      channel text NOT NULL CHECK (channel IN ('email', 'whatsapp')),
      scope text NOT NULL CHECK (scope ~ '^[0-9]{0,3}$'),
      window_start timestamptz NOT NULL,
      sent integer NOT NULL DEFAULT 0 CHECK (sent >= 0),
      granted integer NOT NULL DEFAULT 0 CHECK (granted >= 0),
      first_hold boolean NOT NULL DEFAULT false,
      held_at timestamptz,
      PRIMARY KEY (channel, scope, window_start)
    );
    GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.send_windows TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE outbox.send_windows')
}
