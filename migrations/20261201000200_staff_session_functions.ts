import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * Staff functions verify a live staff session themselves (DESIGN §7). The
 * previous versions were granted to the whole api role and trusted a caller-supplied staff id, so a
 * compromised web process could page dead letters and read full destinations through
 * `reissue_candidate`. Each staff function now takes the SHA-256 of the caller's session token and
 * refuses (42501) unless it names an unrevoked, unexpired session of an active identity that is
 * active staff. The expiry is checked against the later of the caller's clock and the database's,
 * so a caller cannot revive an expired session by passing an old `p_now`.
 *
 * The web's /metrics gauges need the same counts without a staff session (a scraper is no staff
 * member): `outbox.gauge_summary` returns counts only — no row, id or destination — and is the one
 * outbox read the api role keeps without a session. Both it and the staff backlog read
 * `outbox.outbox_counts`, which nobody but the owner may call directly.
 *
 * Reissue also refuses a `provider_rejected` dead letter (`reissue_refused_provider_rejected`): the
 * runbook says never to resend to a destination the provider refused.
 *
 * Replaces: outbox.backlog_summary(timestamptz), outbox.dead_letters_since(timestamptz),
 * outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid),
 * outbox.reissue_candidate(uuid, uuid, timestamptz) — dropped, not merely revoked.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.backlog_summary(timestamptz);
    DROP FUNCTION outbox.dead_letters_since(timestamptz);
    DROP FUNCTION outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid);
    DROP FUNCTION outbox.reissue_candidate(uuid, uuid, timestamptz);

    CREATE FUNCTION platform.staff_identity_for_session(p_session_token_hash bytea, p_now timestamptz) RETURNS uuid
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid;
    BEGIN
      SELECT s.identity_id INTO staff
        FROM identity.sessions s
        JOIN identity.identities i ON i.id = s.identity_id AND i.status = 'active'
        JOIN platform.staff_members m ON m.identity_id = s.identity_id AND m.revoked_at IS NULL
       WHERE s.token_hash = p_session_token_hash AND s.revoked_at IS NULL
         AND s.expires_at > greatest(p_now, now());
      IF staff IS NULL THEN
        RAISE EXCEPTION 'a live staff session is required' USING ERRCODE = 'insufficient_privilege';
      END IF;
      RETURN staff;
    END $$;

    CREATE FUNCTION outbox.outbox_counts(p_now timestamptz)
      RETURNS TABLE (pending bigint, leased bigint, published bigint, dead_lettered bigint, oldest_due_pending_age_seconds double precision,
                     queued bigint, deferred bigint, active bigint, failed bigint, dead_letters_last_24h jsonb)
      -- plpgsql: pg-boss's schema is installed after the migrations, so the body resolves at call time.
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      RETURN QUERY SELECT
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'pending'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'leased'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'published'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'dead_lettered'),
        (SELECT extract(epoch FROM p_now - min(available_at))::double precision FROM outbox.security_outbox_messages
          WHERE state = 'pending' AND available_at <= p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state IN ('created', 'retry') AND start_after <= p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state IN ('created', 'retry') AND start_after > p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state = 'active'),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state = 'failed'),
        (SELECT coalesce(jsonb_object_agg(r.reason, r.n), '{}'::jsonb) FROM (
           SELECT d.reason, count(*) AS n FROM outbox.security_outbox_dead_letters d
            WHERE d.dead_lettered_at >= p_now - interval '24 hours' GROUP BY d.reason) r);
    END $$;

    CREATE FUNCTION outbox.backlog_summary(p_session_token_hash bytea, p_now timestamptz)
      RETURNS TABLE (pending bigint, leased bigint, published bigint, dead_lettered bigint, oldest_due_pending_age_seconds double precision,
                     queued bigint, deferred bigint, active bigint, failed bigint, dead_letters_last_24h jsonb)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT * FROM outbox.outbox_counts(p_now);
    END $$;

    CREATE FUNCTION outbox.gauge_summary(p_now timestamptz)
      RETURNS TABLE (pending bigint, leased bigint, published bigint, dead_lettered bigint, oldest_due_pending_age_seconds double precision,
                     queued bigint, deferred bigint, active bigint, failed bigint, dead_letters_last_24h jsonb)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      RETURN QUERY SELECT * FROM outbox.outbox_counts(p_now);
    END $$;

    -- Keyset pages, newest first, by (dead_lettered_at, message_id); see 20261130001200_operability.
    CREATE FUNCTION outbox.dead_letter_page(p_session_token_hash bytea, p_now timestamptz, p_limit integer,
                                            p_after_at timestamptz, p_after_id uuid, p_before_at timestamptz, p_before_id uuid)
      RETURNS TABLE (message_id uuid, purpose text, channel text, masked_destination text, attempt_count integer, reason text,
                     last_failure_class text, dead_lettered_at timestamptz, expires_at timestamptz)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT * FROM (
        SELECT d.message_id, m.purpose, m.channel, outbox.mask_destination(m.destination), m.attempt_count, d.reason,
               d.last_failure_class, d.dead_lettered_at, m.expires_at
          FROM outbox.security_outbox_dead_letters d JOIN outbox.security_outbox_messages m ON m.id = d.message_id
         WHERE (p_after_at IS NULL OR (d.dead_lettered_at, d.message_id) < (p_after_at, p_after_id))
           AND (p_before_at IS NULL OR (d.dead_lettered_at, d.message_id) > (p_before_at, p_before_id))
         ORDER BY CASE WHEN p_before_at IS NULL THEN d.dead_lettered_at END DESC, CASE WHEN p_before_at IS NULL THEN d.message_id END DESC,
                  CASE WHEN p_before_at IS NOT NULL THEN d.dead_lettered_at END ASC, CASE WHEN p_before_at IS NOT NULL THEN d.message_id END ASC
         LIMIT p_limit
      ) page ORDER BY page.dead_lettered_at DESC, page.message_id DESC;
    END $$;

    -- OX-O2: everything a reissue must check, under locks held to the caller's COMMIT; the staff
    -- member is the session's identity, never a parameter.
    CREATE FUNCTION outbox.reissue_candidate(p_session_token_hash bytea, p_message_id uuid, p_now timestamptz)
      RETURNS TABLE (refusal text, purpose text, challenge_id uuid, channel text, destination text, locale text, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid;
      m record;
      d record;
      c record;
    BEGIN
      staff := platform.staff_identity_for_session(p_session_token_hash, p_now);
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id FOR UPDATE;
      SELECT * INTO d FROM outbox.security_outbox_dead_letters WHERE message_id = p_message_id;
      IF m.id IS NULL OR d.message_id IS NULL THEN RETURN QUERY SELECT 'dead_letter_not_found', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF m.purpose = 'invitation' THEN RETURN QUERY SELECT 'invitation_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF d.reason = 'provider_rejected' THEN
        RETURN QUERY SELECT 'reissue_refused_provider_rejected', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      IF d.reason IN ('superseded_by_resend', 'challenge_expired', 'challenge_consumed') THEN
        RETURN QUERY SELECT d.reason, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      SELECT * INTO c FROM identity.challenges WHERE id = m.challenge_id FOR UPDATE;
      IF c.identity_id = staff THEN RETURN QUERY SELECT 'own_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.consumed_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_consumed', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.revoked_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_revoked', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.expires_at <= p_now THEN RETURN QUERY SELECT 'challenge_expired', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.attempts_left <= 0 THEN RETURN QUERY SELECT 'challenge_out_of_attempts', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF EXISTS (SELECT FROM outbox.security_outbox_messages n
                  WHERE n.purpose = m.purpose AND n.destination = m.destination AND n.id > m.id
                    AND n.state IN ('pending', 'leased', 'published')) THEN
        RETURN QUERY SELECT 'newer_message_exists', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      RETURN QUERY SELECT NULL::text, m.purpose, m.challenge_id, m.channel, m.destination, m.locale, c.expires_at;
    END $$;

    REVOKE ALL ON FUNCTION platform.staff_identity_for_session(bytea, timestamptz), outbox.outbox_counts(timestamptz),
      outbox.backlog_summary(bytea, timestamptz), outbox.gauge_summary(timestamptz),
      outbox.dead_letter_page(bytea, timestamptz, integer, timestamptz, uuid, timestamptz, uuid),
      outbox.reissue_candidate(bytea, uuid, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.backlog_summary(bytea, timestamptz), outbox.gauge_summary(timestamptz),
      outbox.dead_letter_page(bytea, timestamptz, integer, timestamptz, uuid, timestamptz, uuid),
      outbox.reissue_candidate(bytea, uuid, timestamptz) TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.reissue_candidate(bytea, uuid, timestamptz);
    DROP FUNCTION outbox.dead_letter_page(bytea, timestamptz, integer, timestamptz, uuid, timestamptz, uuid);
    DROP FUNCTION outbox.gauge_summary(timestamptz);
    DROP FUNCTION outbox.backlog_summary(bytea, timestamptz);
    DROP FUNCTION outbox.outbox_counts(timestamptz);
    DROP FUNCTION platform.staff_identity_for_session(bytea, timestamptz);
  `)
  // The previous definitions, as 20261130001200_operability created them.
  await knex.raw(`
    CREATE FUNCTION outbox.backlog_summary(p_now timestamptz)
      RETURNS TABLE (pending bigint, leased bigint, published bigint, dead_lettered bigint, oldest_due_pending_age_seconds double precision,
                     queued bigint, deferred bigint, active bigint, failed bigint)
      -- plpgsql, not sql: pg-boss's schema is installed after the migrations, so the body is
      -- resolved at call time rather than at CREATE.
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      RETURN QUERY SELECT
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'pending'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'leased'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'published'),
        (SELECT count(*) FROM outbox.security_outbox_messages WHERE state = 'dead_lettered'),
        (SELECT extract(epoch FROM p_now - min(available_at))::double precision FROM outbox.security_outbox_messages
          WHERE state = 'pending' AND available_at <= p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state IN ('created', 'retry') AND start_after <= p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state IN ('created', 'retry') AND start_after > p_now),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state = 'active'),
        (SELECT count(*) FROM pgboss.job WHERE name = 'security-outbox' AND state = 'failed');
    END $$;

    CREATE FUNCTION outbox.dead_letters_since(p_since timestamptz) RETURNS TABLE (reason text, count bigint)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT reason, count(*) FROM outbox.security_outbox_dead_letters WHERE dead_lettered_at >= p_since GROUP BY reason
    $$;

    -- Keyset pages, newest first, by (dead_lettered_at, message_id). p_after: the page after that
    -- cursor (older); p_before: the page before it (newer), returned newest first as well.
    CREATE FUNCTION outbox.dead_letter_page(p_limit integer, p_after_at timestamptz, p_after_id uuid, p_before_at timestamptz, p_before_id uuid)
      RETURNS TABLE (message_id uuid, purpose text, channel text, masked_destination text, attempt_count integer, reason text,
                     last_failure_class text, dead_lettered_at timestamptz, expires_at timestamptz)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT * FROM (
        SELECT d.message_id, m.purpose, m.channel, outbox.mask_destination(m.destination), m.attempt_count, d.reason,
               d.last_failure_class, d.dead_lettered_at, m.expires_at
          FROM outbox.security_outbox_dead_letters d JOIN outbox.security_outbox_messages m ON m.id = d.message_id
         WHERE (p_after_at IS NULL OR (d.dead_lettered_at, d.message_id) < (p_after_at, p_after_id))
           AND (p_before_at IS NULL OR (d.dead_lettered_at, d.message_id) > (p_before_at, p_before_id))
         ORDER BY CASE WHEN p_before_at IS NULL THEN d.dead_lettered_at END DESC, CASE WHEN p_before_at IS NULL THEN d.message_id END DESC,
                  CASE WHEN p_before_at IS NOT NULL THEN d.dead_lettered_at END ASC, CASE WHEN p_before_at IS NOT NULL THEN d.message_id END ASC
         LIMIT p_limit
      ) page ORDER BY dead_lettered_at DESC, message_id DESC
    $$;

    -- OX-O2: everything a reissue must check, under locks held to the caller's COMMIT (the dead
    -- letter's message, then its challenge). Returns the refusal, or what the new message needs.
    CREATE FUNCTION outbox.reissue_candidate(p_message_id uuid, p_staff_identity uuid, p_now timestamptz)
      RETURNS TABLE (refusal text, purpose text, challenge_id uuid, channel text, destination text, locale text, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      d record;
      c record;
    BEGIN
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id FOR UPDATE;
      SELECT * INTO d FROM outbox.security_outbox_dead_letters WHERE message_id = p_message_id;
      IF m.id IS NULL OR d.message_id IS NULL THEN RETURN QUERY SELECT 'dead_letter_not_found', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF m.purpose = 'invitation' THEN RETURN QUERY SELECT 'invitation_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF d.reason IN ('superseded_by_resend', 'challenge_expired', 'challenge_consumed') THEN
        RETURN QUERY SELECT d.reason, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      SELECT * INTO c FROM identity.challenges WHERE id = m.challenge_id FOR UPDATE;
      IF c.identity_id = p_staff_identity THEN RETURN QUERY SELECT 'own_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.consumed_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_consumed', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.revoked_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_revoked', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.expires_at <= p_now THEN RETURN QUERY SELECT 'challenge_expired', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.attempts_left <= 0 THEN RETURN QUERY SELECT 'challenge_out_of_attempts', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      -- A newer message (ids are UUIDv7, ordered by time) for the same purpose and destination that
      -- is live or was sent: the person has, or will have, a newer code; this one must not replace it.
      IF EXISTS (SELECT FROM outbox.security_outbox_messages n
                  WHERE n.purpose = m.purpose AND n.destination = m.destination AND n.id > m.id
                    AND n.state IN ('pending', 'leased', 'published')) THEN
        RETURN QUERY SELECT 'newer_message_exists', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      RETURN QUERY SELECT NULL::text, m.purpose, m.challenge_id, m.channel, m.destination, m.locale, c.expires_at;
    END $$;

    REVOKE ALL ON FUNCTION outbox.backlog_summary(timestamptz), outbox.dead_letters_since(timestamptz),
      outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid), outbox.reissue_candidate(uuid, uuid, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.backlog_summary(timestamptz), outbox.dead_letters_since(timestamptz),
      outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid), outbox.reissue_candidate(uuid, uuid, timestamptz) TO ${API_ROLE};
  `)
}
