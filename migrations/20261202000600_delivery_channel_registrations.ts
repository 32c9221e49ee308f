import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Which channels exist has one source of truth, written by the workers (docs/delivery.md
 * "Channels"): every worker registers, at startup and then every minute, the channels it has a
 * provider for and the provider ids. The web reads only `outbox.available_channels()`.
 *
 * The rule (its one home is `outbox.current_channel_registrations`): the available channels are
 * the union of the channels of the registrations seen within 3 minutes of the most recent
 * registration's `seen_at`. Anchored on the newest registration, not on a clock: a fleet that is
 * down keeps its last known channels (the web keeps accepting, the outbox holds the messages
 * until a worker is back), and a reconfigured fleet (a new worker without WhatsApp replacing the
 * old ones) takes effect within a few minutes, once the old workers' last heartbeats are more than
 * 3 minutes older than the newest. No registration at all (no worker ever ran) = no channels.
 *
 * The worker role writes and sweeps the rows (every worker is one role: a worker writes only its
 * own row by the code, not by a policy); the api role can only call `available_channels`
 * (SECURITY DEFINER): it never sees worker ids or provider ids. A new table and new functions: the
 * previous release neither reads nor writes them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE outbox.delivery_channel_registrations (
      worker_id uuid PRIMARY KEY,
      channels text[] NOT NULL CHECK (channels <@ ARRAY['email', 'whatsapp']),
      providers text[] NOT NULL CHECK (cardinality(providers) <= 16 AND array_position(providers, NULL) IS NULL),
      started_at timestamptz NOT NULL,
      seen_at timestamptz NOT NULL,
      CHECK (seen_at >= started_at)
    );
    CREATE INDEX delivery_channel_registrations_seen_at ON outbox.delivery_channel_registrations (seen_at);
    GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.delivery_channel_registrations TO ${WORKER_ROLE};

    -- A database that has served traffic has a fleet of the previous release, which never
    -- registers: a new web beside those workers during a rolling upgrade must keep accepting what
    -- they send. Their channels are written in once, as that release's production workers had
    -- them (both SES and Wasender were required), under a worker id no process uses; the row drops
    -- out of the set once the new workers' registrations are 3 minutes newer. A fresh database
    -- gets none: no worker ever ran, no channels.
    INSERT INTO outbox.delivery_channel_registrations (worker_id, channels, providers, started_at, seen_at)
    SELECT '00000000-0000-0000-0000-000000000000', ARRAY['email', 'whatsapp'], ARRAY[]::text[], now(), now()
     WHERE EXISTS (SELECT FROM outbox.security_outbox_messages);

    CREATE FUNCTION outbox.current_channel_registrations() RETURNS SETOF outbox.delivery_channel_registrations
      LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
      SELECT r.* FROM outbox.delivery_channel_registrations r
       WHERE r.seen_at >= (SELECT max(seen_at) FROM outbox.delivery_channel_registrations) - interval '3 minutes'
    $$;
    REVOKE ALL ON FUNCTION outbox.current_channel_registrations() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.current_channel_registrations() TO ${WORKER_ROLE};

    CREATE FUNCTION outbox.available_channels() RETURNS text[]
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT coalesce(array_agg(DISTINCT channel ORDER BY channel), '{}')
        FROM outbox.current_channel_registrations() r, unnest(r.channels) AS channel
    $$;
    REVOKE ALL ON FUNCTION outbox.available_channels() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.available_channels() TO ${API_ROLE}, ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.available_channels();
    DROP FUNCTION outbox.current_channel_registrations();
    DROP TABLE outbox.delivery_channel_registrations;
  `)
}
