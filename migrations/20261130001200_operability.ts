import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Staff operations (seed 000 OX-O1, OX-O2, OB10). The web reads the outbox only through these
 * SECURITY DEFINER functions, each returning exactly what its route shows: counts, and dead
 * letters with destinations masked here, so a full address or number never leaves the database
 * through them. A reissue checks and locks everything in `outbox.reissue_candidate`; the web then
 * mints the code, replaces the challenge's code hash and enqueues as it does for any code.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE platform.staff_members (
      identity_id uuid PRIMARY KEY REFERENCES identity.identities (id),
      granted_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    );

    -- Who did what to which subject; never a code, token or address.
    CREATE TABLE platform.audit_records (
      id uuid PRIMARY KEY,
      at timestamptz NOT NULL DEFAULT now(),
      actor text NOT NULL,
      action text NOT NULL,
      subject text,
      details jsonb NOT NULL DEFAULT '{}'
    );
    CREATE INDEX audit_records_at_idx ON platform.audit_records (at);

    CREATE TABLE platform.idempotency_keys (
      identity_id uuid NOT NULL,
      scope text NOT NULL,
      key text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 200),
      request_hash bytea NOT NULL,
      response jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (identity_id, scope, key)
    );
    CREATE INDEX idempotency_keys_created_idx ON platform.idempotency_keys (created_at);

    -- Masking, defined once: first and last character of the local part and of the domain's first
    -- label, the rest of the domain kept; a phone keeps its first three and last four characters.
    CREATE FUNCTION outbox.mask_destination(p_destination text) RETURNS text
      LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
      SELECT CASE
        WHEN position('@' IN p_destination) > 0 THEN
          (SELECT left(local, 1) || '•••' || CASE WHEN char_length(local) > 1 THEN right(local, 1) ELSE '' END
                  || '@' || left(label, 1) || '•••' || CASE WHEN rest <> '' THEN '.' || rest ELSE '' END
             FROM (SELECT split_part(p_destination, '@', 1) AS local,
                          split_part(split_part(p_destination, '@', 2), '.', 1) AS label,
                          substr(split_part(p_destination, '@', 2), char_length(split_part(split_part(p_destination, '@', 2), '.', 1)) + 2) AS rest) parts)
        ELSE left(p_destination, 3) || repeat('•', greatest(char_length(p_destination) - 7, 1)) || right(p_destination, 4)
      END
    $$;

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

    CREATE FUNCTION platform.sweep(p_now timestamptz, p_limit integer) RETURNS TABLE (audit_records integer, idempotency_keys integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      DELETE FROM platform.audit_records WHERE id IN (SELECT id FROM platform.audit_records WHERE at < p_now - interval '400 days' LIMIT p_limit);
      GET DIAGNOSTICS audit_records = ROW_COUNT;
      DELETE FROM platform.idempotency_keys k WHERE (k.identity_id, k.scope, k.key) IN (
        SELECT identity_id, scope, key FROM platform.idempotency_keys WHERE created_at < p_now - interval '1 day' LIMIT p_limit);
      GET DIAGNOSTICS idempotency_keys = ROW_COUNT;
      RETURN NEXT;
    END $$;

    REVOKE ALL ON FUNCTION outbox.mask_destination(text), outbox.backlog_summary(timestamptz), outbox.dead_letters_since(timestamptz),
      outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid), outbox.reissue_candidate(uuid, uuid, timestamptz),
      platform.sweep(timestamptz, integer) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.backlog_summary(timestamptz), outbox.dead_letters_since(timestamptz),
      outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid), outbox.reissue_candidate(uuid, uuid, timestamptz) TO ${API_ROLE};
    GRANT EXECUTE ON FUNCTION platform.sweep(timestamptz, integer) TO ${WORKER_ROLE};
    GRANT SELECT ON platform.staff_members TO ${API_ROLE};
    GRANT INSERT ON platform.audit_records TO ${API_ROLE};
    GRANT SELECT, INSERT, UPDATE ON platform.idempotency_keys TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION platform.sweep(timestamptz, integer);
    DROP FUNCTION outbox.reissue_candidate(uuid, uuid, timestamptz);
    DROP FUNCTION outbox.dead_letter_page(integer, timestamptz, uuid, timestamptz, uuid);
    DROP FUNCTION outbox.dead_letters_since(timestamptz);
    DROP FUNCTION outbox.backlog_summary(timestamptz);
    DROP FUNCTION outbox.mask_destination(text);
    DROP TABLE platform.idempotency_keys, platform.audit_records, platform.staff_members;
  `)
}
