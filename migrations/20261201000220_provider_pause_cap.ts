import type { Knex } from 'knex'

/**
 * Provider pauses get a ceiling and a back-off streak. `throttle_streak` counts
 * hint-less THROTTLED answers in a row, so the fleet-wide back-off grows while a provider keeps
 * throttling. A pause written before the cap existed is cut to five minutes from now (the default
 * MAX_PROVIDER_PAUSE_SECONDS), so an old `Retry-After: 31536000` stops nothing after this release.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.provider_pauses ADD COLUMN throttle_streak integer NOT NULL DEFAULT 0 CHECK (throttle_streak >= 0);
    UPDATE outbox.provider_pauses SET paused_until = now() + interval '300 seconds', updated_at = now()
     WHERE paused_until > now() + interval '300 seconds';
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox.provider_pauses DROP COLUMN throttle_streak')
}
