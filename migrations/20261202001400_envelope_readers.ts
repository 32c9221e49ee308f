import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * Format negotiation (docs/upgrading.md "Format negotiation"): the web seals the newest envelope
 * version every live worker opens. Liveness is the connection itself: every worker session names
 * itself `sealpost-worker…` in `application_name`, and from this release on announces what it
 * reads (`sealpost-worker-boss;envelopes=v1,v2`); a worker session that announces nothing is the
 * previous release's (0.1.0), which opens only v1. When no worker is connected, the registrations
 * decide: the previous fleet's stand-in row (written by 20261202000600 on a database that had
 * served traffic) still current means an old worker may come back, so v1.
 *
 * SECURITY DEFINER: the api role reads neither the registrations nor (in every managed setting)
 * other roles' sessions. It sees application names and a yes/no, nothing else. A new function:
 * the previous release neither calls nor needs it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.envelope_readers()
      RETURNS TABLE (live_workers text[], legacy_fleet_registered boolean)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT
        (SELECT coalesce(array_agg(DISTINCT a.application_name ORDER BY a.application_name), '{}')
           FROM pg_stat_activity a
          WHERE a.datname = current_database() AND a.application_name LIKE 'sealpost-worker%'),
        EXISTS (
          SELECT FROM outbox.delivery_channel_registrations r
           WHERE r.worker_id = '00000000-0000-0000-0000-000000000000'
             AND r.seen_at >= (SELECT max(seen_at) FROM outbox.delivery_channel_registrations) - interval '3 minutes')
    $$;
    REVOKE ALL ON FUNCTION outbox.envelope_readers() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.envelope_readers() TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION outbox.envelope_readers()')
}
