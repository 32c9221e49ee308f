import type { Knex } from 'knex'

/**
 * A courier key's power bounded (docs/courier.md "Keys"), and the hook callers no longer keys.
 *
 * - `api_keys.sends_per_hour`, `destinations_per_hour`: what a key may send in a clock hour, and to
 *   how many addresses it had not sent to within the hour. Keys made before keep what they could
 *   do before (their request rate for an hour, to as many addresses) until staff set them; new
 *   keys get the route's defaults.
 * - `api_keys.link_origins`: the https origins a key's `magic_link` may point at; none = no magic
 *   link. Keys made before have none.
 * - `api_keys.kind`: `hook` for the two rows the hook adapters are attributed to
 *   (20261202002800_hook_callers). Staff functions do not list, rotate, revoke or change them,
 *   and no request authenticates as one.
 * - `platform.api_key_hours` and `platform.spend_api_key_hour`: one counter row per key and hour,
 *   as `api_key_minutes` per minute.
 * The previous release's web reads its columns by name and calls these functions with the same
 * arguments; `api_key_list` returns more columns than it reads.
 */
const LIST = `
    CREATE FUNCTION platform.api_key_list(p_session_hash bytea, p_now timestamptz)
      RETURNS TABLE (id uuid, name text, purposes text[], channels text[], requests_per_minute integer, per_destination_per_hour integer,
                     per_destination_per_day integer, created_by uuid, created_at timestamptz, revoked_at timestamptz,
                     last_used_at timestamptz, replaces uuid, sends_per_hour integer, destinations_per_hour integer, link_origins text[])
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_hash, p_now);
      RETURN QUERY SELECT k.id, k.name, k.purposes, k.channels, k.requests_per_minute, k.per_destination_per_hour,
                          k.per_destination_per_day, k.created_by, k.created_at, k.revoked_at, k.last_used_at, k.replaces,
                          k.sends_per_hour, k.destinations_per_hour, k.link_origins
        FROM platform.api_keys k WHERE k.kind = 'key' ORDER BY k.created_at DESC, k.id DESC LIMIT 500;
    END $$;
    REVOKE ALL ON FUNCTION platform.api_key_list(bytea, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.api_key_list(bytea, timestamptz) TO sealpost_api;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE platform.api_keys
      ADD COLUMN kind text NOT NULL DEFAULT 'key' CHECK (kind IN ('key', 'hook')),
      ADD COLUMN sends_per_hour integer NOT NULL DEFAULT 1000 CHECK (sends_per_hour BETWEEN 1 AND 6000000),
      ADD COLUMN destinations_per_hour integer NOT NULL DEFAULT 100 CHECK (destinations_per_hour BETWEEN 1 AND 6000000),
      ADD COLUMN link_origins text[] NOT NULL DEFAULT '{}' CHECK (cardinality(link_origins) <= 20);
    UPDATE platform.api_keys SET kind = 'hook'
     WHERE id IN ('0193c0de-5ab0-7000-8000-000000000001', '0193c0de-5ab0-7000-8000-000000000002');
    UPDATE platform.api_keys SET sends_per_hour = requests_per_minute * 60, destinations_per_hour = requests_per_minute * 60;
    GRANT SELECT (kind, sends_per_hour, destinations_per_hour, link_origins) ON platform.api_keys TO sealpost_api;

    CREATE TABLE platform.api_key_hours (
      api_key_id uuid NOT NULL REFERENCES platform.api_keys (id),
      hour timestamptz NOT NULL,
      sends integer NOT NULL,
      destinations integer NOT NULL,
      PRIMARY KEY (api_key_id, hour)
    );
    GRANT SELECT, INSERT, UPDATE, DELETE ON platform.api_key_hours TO sealpost_api;

    -- One send of a key this hour (and one new address, with p_new_destination): counted when both
    -- fit, else nothing is counted and the seconds to the next hour are returned. The hour's first
    -- send drops the key's older hours.
    CREATE FUNCTION platform.spend_api_key_hour(p_key uuid, p_now timestamptz, p_max_sends integer, p_max_destinations integer,
                                                p_new_destination boolean) RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      this_hour timestamptz := to_timestamp(floor(extract(epoch FROM p_now) / 3600) * 3600);
      added integer := CASE WHEN p_new_destination THEN 1 ELSE 0 END;
      spent integer;
      fresh boolean;
    BEGIN
      IF p_max_sends < 1 OR p_max_destinations < added THEN RETURN extract(epoch FROM this_hour + interval '1 hour' - p_now); END IF;
      INSERT INTO platform.api_key_hours AS h (api_key_id, hour, sends, destinations) VALUES (p_key, this_hour, 1, added)
        ON CONFLICT (api_key_id, hour) DO UPDATE SET sends = h.sends + 1, destinations = h.destinations + added
          WHERE h.sends < p_max_sends AND h.destinations + added <= p_max_destinations
        RETURNING sends, (xmax = 0) INTO spent, fresh;
      IF spent IS NULL THEN RETURN extract(epoch FROM this_hour + interval '1 hour' - p_now); END IF;
      IF fresh THEN DELETE FROM platform.api_key_hours WHERE api_key_id = p_key AND hour < this_hour; END IF;
      RETURN NULL;
    END $$;
    REVOKE ALL ON FUNCTION platform.spend_api_key_hour(uuid, timestamptz, integer, integer, boolean) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.spend_api_key_hour(uuid, timestamptz, integer, integer, boolean) TO sealpost_api;

    CREATE OR REPLACE FUNCTION platform.create_api_key(p_session_hash bytea, p_now timestamptz, p jsonb) RETURNS void
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
      old platform.api_keys;
    BEGIN
      IF p->>'replaces' IS NOT NULL THEN
        UPDATE platform.api_keys SET revoked_at = p_now
         WHERE id = (p->>'replaces')::uuid AND revoked_at IS NULL AND kind = 'key' RETURNING * INTO old;
        IF old.id IS NULL THEN RAISE EXCEPTION 'no live api key to rotate' USING ERRCODE = 'no_data_found'; END IF;
      END IF;
      INSERT INTO platform.api_keys (id, name, secret_hash, purposes, channels, requests_per_minute, per_destination_per_hour,
                                     per_destination_per_day, created_by, created_at, replaces, sends_per_hour, destinations_per_hour,
                                     link_origins)
      VALUES ((p->>'id')::uuid, coalesce(old.name, p->>'name'), decode(p->>'secret_hash', 'hex'),
              coalesce(old.purposes, ARRAY(SELECT jsonb_array_elements_text(p->'purposes'))),
              coalesce(old.channels, ARRAY(SELECT jsonb_array_elements_text(p->'channels'))),
              coalesce(old.requests_per_minute, (p->>'requests_per_minute')::integer),
              coalesce(old.per_destination_per_hour, (p->>'per_destination_per_hour')::integer),
              coalesce(old.per_destination_per_day, (p->>'per_destination_per_day')::integer),
              staff, p_now, old.id,
              coalesce(old.sends_per_hour, (p->>'sends_per_hour')::integer, 1000),
              coalesce(old.destinations_per_hour, (p->>'destinations_per_hour')::integer, 100),
              coalesce(old.link_origins, ARRAY(SELECT jsonb_array_elements_text(coalesce(p->'link_origins', '[]'::jsonb)))));
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, CASE WHEN old.id IS NULL THEN 'api_key.created' ELSE 'api_key.rotated' END,
                p->>'id', CASE WHEN old.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('replaces', old.id) END);
    END $$;

    CREATE OR REPLACE FUNCTION platform.revoke_api_key(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
    BEGIN
      UPDATE platform.api_keys SET revoked_at = p_now WHERE id = p_id AND revoked_at IS NULL AND kind = 'key';
      IF NOT FOUND THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'api_key.revoked', p_id::text, '{}'::jsonb);
      RETURN true;
    END $$;

    -- A live key's budgets and link origins, changed in place (audited with what was set).
    CREATE FUNCTION platform.change_api_key(p_session_hash bytea, p_now timestamptz, p_id uuid, p jsonb) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
    BEGIN
      UPDATE platform.api_keys
         SET sends_per_hour = coalesce((p->>'sends_per_hour')::integer, sends_per_hour),
             destinations_per_hour = coalesce((p->>'destinations_per_hour')::integer, destinations_per_hour),
             link_origins = CASE WHEN p->'link_origins' IS NULL THEN link_origins
                                 ELSE ARRAY(SELECT jsonb_array_elements_text(p->'link_origins')) END
       WHERE id = p_id AND revoked_at IS NULL AND kind = 'key';
      IF NOT FOUND THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'api_key.changed', p_id::text, p);
      RETURN true;
    END $$;
    REVOKE ALL ON FUNCTION platform.change_api_key(bytea, timestamptz, uuid, jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.change_api_key(bytea, timestamptz, uuid, jsonb) TO sealpost_api;

    DROP FUNCTION platform.api_key_list(bytea, timestamptz);
    ${LIST}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION platform.change_api_key(bytea, timestamptz, uuid, jsonb);
    DROP FUNCTION platform.spend_api_key_hour(uuid, timestamptz, integer, integer, boolean);
    DROP TABLE platform.api_key_hours;
    DROP FUNCTION platform.api_key_list(bytea, timestamptz);
    CREATE FUNCTION platform.api_key_list(p_session_hash bytea, p_now timestamptz)
      RETURNS TABLE (id uuid, name text, purposes text[], channels text[], requests_per_minute integer, per_destination_per_hour integer,
                     per_destination_per_day integer, created_by uuid, created_at timestamptz, revoked_at timestamptz,
                     last_used_at timestamptz, replaces uuid)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_hash, p_now);
      RETURN QUERY SELECT k.id, k.name, k.purposes, k.channels, k.requests_per_minute, k.per_destination_per_hour,
                          k.per_destination_per_day, k.created_by, k.created_at, k.revoked_at, k.last_used_at, k.replaces
        FROM platform.api_keys k ORDER BY k.created_at DESC, k.id DESC LIMIT 500;
    END $$;
    REVOKE ALL ON FUNCTION platform.api_key_list(bytea, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.api_key_list(bytea, timestamptz) TO sealpost_api;
    CREATE OR REPLACE FUNCTION platform.revoke_api_key(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
    BEGIN
      UPDATE platform.api_keys SET revoked_at = p_now WHERE id = p_id AND revoked_at IS NULL;
      IF NOT FOUND THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'api_key.revoked', p_id::text, '{}'::jsonb);
      RETURN true;
    END $$;
    CREATE OR REPLACE FUNCTION platform.create_api_key(p_session_hash bytea, p_now timestamptz, p jsonb) RETURNS void
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
      old platform.api_keys;
    BEGIN
      IF p->>'replaces' IS NOT NULL THEN
        UPDATE platform.api_keys SET revoked_at = p_now WHERE id = (p->>'replaces')::uuid AND revoked_at IS NULL RETURNING * INTO old;
        IF old.id IS NULL THEN RAISE EXCEPTION 'no live api key to rotate' USING ERRCODE = 'no_data_found'; END IF;
      END IF;
      INSERT INTO platform.api_keys (id, name, secret_hash, purposes, channels, requests_per_minute, per_destination_per_hour,
                                     per_destination_per_day, created_by, created_at, replaces)
      VALUES ((p->>'id')::uuid, coalesce(old.name, p->>'name'), decode(p->>'secret_hash', 'hex'),
              coalesce(old.purposes, ARRAY(SELECT jsonb_array_elements_text(p->'purposes'))),
              coalesce(old.channels, ARRAY(SELECT jsonb_array_elements_text(p->'channels'))),
              coalesce(old.requests_per_minute, (p->>'requests_per_minute')::integer),
              coalesce(old.per_destination_per_hour, (p->>'per_destination_per_hour')::integer),
              coalesce(old.per_destination_per_day, (p->>'per_destination_per_day')::integer),
              staff, p_now, old.id);
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, CASE WHEN old.id IS NULL THEN 'api_key.created' ELSE 'api_key.rotated' END,
                p->>'id', CASE WHEN old.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('replaces', old.id) END);
    END $$;
    ALTER TABLE platform.api_keys DROP COLUMN link_origins, DROP COLUMN destinations_per_hour, DROP COLUMN sends_per_hour, DROP COLUMN kind;
  `)
}
