import type { Knex } from 'knex'

/**
 * One staff check for every staff function: the suppression functions (20261201000500) checked a
 * staff session with a copy of their own, `outbox.staff_identity`, which skipped "the identity is
 * active" and trusted the caller's clock for the session's expiry. They now call
 * `platform.staff_identity_for_session` (20261201000200) like every other staff function, and the
 * copy is gone. Same signatures: a previous release's web calls them unchanged.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.suppression_page(p_session_hash bytea, p_now timestamptz, p_limit integer, p_after_since timestamptz, p_after_id uuid)
      RETURNS TABLE (id uuid, channel text, masked_destination text, reason text, since timestamptz, message_id uuid)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_hash, p_now);
      RETURN QUERY SELECT s.id, s.channel, s.masked_destination, s.reason, s.since, s.message_id
        FROM outbox.suppressed_destinations s
       WHERE p_after_since IS NULL OR (s.since, s.id) < (p_after_since, p_after_id)
       ORDER BY s.since DESC, s.id DESC
       LIMIT p_limit;
    END $$;

    CREATE OR REPLACE FUNCTION outbox.lift_suppression(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
      lifted record;
    BEGIN
      DELETE FROM outbox.suppressed_destinations WHERE id = p_id RETURNING reason, channel, since INTO lifted;
      IF lifted.reason IS NULL THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'security_outbox.suppression_lifted', p_id::text,
                jsonb_build_object('reason', lifted.reason, 'channel', lifted.channel, 'since', lifted.since));
      RETURN true;
    END $$;

    DROP FUNCTION outbox.staff_identity(bytea, timestamptz);
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.staff_identity(p_session_hash bytea, p_now timestamptz) RETURNS uuid
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT s.identity_id FROM identity.sessions s JOIN platform.staff_members st ON st.identity_id = s.identity_id
       WHERE s.token_hash = p_session_hash AND s.revoked_at IS NULL AND s.expires_at > p_now AND st.revoked_at IS NULL
    $$;
    REVOKE ALL ON FUNCTION outbox.staff_identity(bytea, timestamptz) FROM PUBLIC;

    CREATE OR REPLACE FUNCTION outbox.suppression_page(p_session_hash bytea, p_now timestamptz, p_limit integer, p_after_since timestamptz, p_after_id uuid)
      RETURNS TABLE (id uuid, channel text, masked_destination text, reason text, since timestamptz, message_id uuid)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF outbox.staff_identity(p_session_hash, p_now) IS NULL THEN
        RAISE EXCEPTION 'not a live staff session' USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN QUERY SELECT s.id, s.channel, s.masked_destination, s.reason, s.since, s.message_id
        FROM outbox.suppressed_destinations s
       WHERE p_after_since IS NULL OR (s.since, s.id) < (p_after_since, p_after_id)
       ORDER BY s.since DESC, s.id DESC
       LIMIT p_limit;
    END $$;

    CREATE OR REPLACE FUNCTION outbox.lift_suppression(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := outbox.staff_identity(p_session_hash, p_now);
      lifted record;
    BEGIN
      IF staff IS NULL THEN
        RAISE EXCEPTION 'not a live staff session' USING ERRCODE = 'insufficient_privilege';
      END IF;
      DELETE FROM outbox.suppressed_destinations WHERE id = p_id RETURNING reason, channel, since INTO lifted;
      IF lifted.reason IS NULL THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'security_outbox.suppression_lifted', p_id::text,
                jsonb_build_object('reason', lifted.reason, 'channel', lifted.channel, 'since', lifted.since));
      RETURN true;
    END $$;
  `)
}
