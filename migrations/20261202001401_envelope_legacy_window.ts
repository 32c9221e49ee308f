import type { Knex } from 'knex'

/**
 * The previous release's workers (0.1.0, which announce nothing and open only v1) count as readers
 * only during the upgrade that introduced the announcement: while the stand-in registration that
 * 20261202000600 wrote on an upgraded database exists AND that migration ran within the last 30
 * minutes. Both the stand-in's timestamps and a session's application name are writable by the
 * worker login; the migration's time in `public.knex_migrations` is the owner's alone. Without the
 * bound, a stolen worker login could connect under 0.1.0's name (or refresh the stand-in) for ever
 * and keep every web sealing v1, which binds no channel or destination, so that an edited
 * destination would open. A fleet that needs v1 for longer pins ENVELOPE_VERSION=v1 (an operator's
 * setting, not the worker login's).
 */
const STAND_IN = '00000000-0000-0000-0000-000000000000'

const withWindow = (legacy: string) => `
    CREATE OR REPLACE FUNCTION outbox.envelope_readers()
      RETURNS TABLE (live_workers text[], legacy_fleet_registered boolean)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT
        (SELECT coalesce(array_agg(DISTINCT a.application_name ORDER BY a.application_name), '{}')
           FROM pg_stat_activity a
          WHERE a.datname = current_database() AND a.application_name LIKE 'sealpost-worker%'),
        ${legacy}
    $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    withWindow(`EXISTS (SELECT FROM outbox.delivery_channel_registrations r WHERE r.worker_id = '${STAND_IN}')
        AND EXISTS (
          SELECT FROM public.knex_migrations m
           WHERE m.name = '20261202000600_delivery_channel_registrations'
             AND m.migration_time >= now() - interval '30 minutes')`),
  )
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    withWindow(`EXISTS (
          SELECT FROM outbox.delivery_channel_registrations r
           WHERE r.worker_id = '${STAND_IN}'
             AND r.seen_at >= (SELECT max(seen_at) FROM outbox.delivery_channel_registrations) - interval '3 minutes')`),
  )
}
