import type { Knex } from 'knex'

/**
 * An idle timeout besides the absolute one (ASVS 3.3.2): a session records when it was last used,
 * touched by the bearer middleware at most once a minute. Nullable with no default, so the
 * previous release, which inserts sessions without it, keeps working: a session never touched
 * counts as last used when it was created (`coalesce(last_used_at, created_at)`), on the web's own
 * clock, not the database's.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE identity.sessions ADD COLUMN last_used_at timestamptz`)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE identity.sessions DROP COLUMN last_used_at`)
}
