import type { Knex } from 'knex'

/**
 * Delivery feedback (DESIGN §12): provider events per message, the suppression list and the
 * `destination_suppressed` dead-letter reason. Literal values only (CONVENTIONS §10).
 *
 * - A message carries `destination_hmac`, the HMAC of its canonical destination computed by the
 *   web at enqueue, so neither the worker (suppression check) nor the webhook (suppression) needs
 *   a key or the address itself.
 * - The web inserts events and suppressions only through `outbox.record_delivery_event`; it never
 *   reads a destination. Staff read and lift suppressions only through the two staff functions,
 *   which verify a live staff session from the SHA-256 of its token themselves.
 * - Events cascade with their message, so the retention sweep covers them; a suppression outlives
 *   its message (`message_id` is set to NULL) until staff lift it.
 *
 * Redefines the CHECK constraint `security_outbox_dead_letters_reason_check`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_dead_letters DROP CONSTRAINT security_outbox_dead_letters_reason_check;
    ALTER TABLE outbox.security_outbox_dead_letters ADD CONSTRAINT security_outbox_dead_letters_reason_check CHECK (reason IN (
      'provider_rejected', 'retries_exhausted', 'challenge_expired', 'challenge_consumed', 'decryption_failed',
      'superseded_by_resend', 'worker_crash_loop', 'invitation_revoked', 'invitation_accepted', 'invitation_expired',
      'destination_suppressed'));

    ALTER TABLE outbox.security_outbox_messages ADD COLUMN destination_hmac bytea CHECK (octet_length(destination_hmac) = 32);
    CREATE INDEX attempts_provider_message_id_idx ON outbox.security_outbox_attempts (provider_message_id) WHERE provider_message_id IS NOT NULL;

    CREATE TABLE outbox.security_outbox_delivery_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      message_id uuid NOT NULL REFERENCES outbox.security_outbox_messages (id) ON DELETE CASCADE,
      event text NOT NULL CHECK (event IN ('delivered', 'bounced', 'complained', 'rejected', 'delayed')),
      subtype text CHECK (char_length(subtype) <= 100),
      occurred_at timestamptz NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT delivery_events_once UNIQUE NULLS NOT DISTINCT (message_id, event, subtype, occurred_at)
    );
    CREATE INDEX delivery_events_received_idx ON outbox.security_outbox_delivery_events (received_at);

    CREATE TABLE outbox.suppressed_destinations (
      id uuid PRIMARY KEY,
      destination_hmac bytea NOT NULL UNIQUE CHECK (octet_length(destination_hmac) = 32),
      channel text NOT NULL CHECK (channel IN ('email', 'whatsapp')),
      masked_destination text NOT NULL,
      reason text NOT NULL CHECK (reason IN ('permanent_bounce', 'complaint')),
      since timestamptz NOT NULL,
      message_id uuid REFERENCES outbox.security_outbox_messages (id) ON DELETE SET NULL
    );
    CREATE INDEX suppressed_destinations_page_idx ON outbox.suppressed_destinations (since DESC, id DESC);

    -- The webhook's only write path: match the provider's message id to the attempt that got it,
    -- store the event once, and suppress the destination when asked (a permanent bounce or a
    -- complaint, decided by the caller). Returns what happened and, for metrics, the purpose.
    CREATE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
                                                 p_occurred_at timestamptz, p_received_at timestamptz, p_suppress_reason text)
      RETURNS TABLE (outcome text, message_id uuid, purpose text)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      inserted integer;
    BEGIN
      SELECT msg.id, msg.purpose, msg.channel, msg.destination, msg.destination_hmac INTO m
        FROM outbox.security_outbox_attempts a JOIN outbox.security_outbox_messages msg ON msg.id = a.message_id
       WHERE a.provider_message_id = p_provider_message_id AND msg.channel = p_channel
       ORDER BY a.attempted_at DESC LIMIT 1;
      IF m.id IS NULL THEN
        RETURN QUERY SELECT 'unknown_message'::text, NULL::uuid, NULL::text; RETURN;
      END IF;
      INSERT INTO outbox.security_outbox_delivery_events (message_id, event, subtype, occurred_at, received_at)
        VALUES (m.id, p_event, p_subtype, p_occurred_at, p_received_at)
        ON CONFLICT ON CONSTRAINT delivery_events_once DO NOTHING;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      IF p_suppress_reason IS NOT NULL AND m.destination_hmac IS NOT NULL THEN
        INSERT INTO outbox.suppressed_destinations (id, destination_hmac, channel, masked_destination, reason, since, message_id)
          VALUES (gen_random_uuid(), m.destination_hmac, m.channel, outbox.mask_destination(m.destination), p_suppress_reason, p_occurred_at, m.id)
          ON CONFLICT (destination_hmac) DO NOTHING;
      END IF;
      RETURN QUERY SELECT CASE WHEN inserted > 0 THEN 'stored' ELSE 'duplicate' END, m.id, m.purpose;
    END $$;

    -- Staff functions verify a live staff session from the SHA-256 of its token (TEAM contract).
    CREATE FUNCTION outbox.staff_identity(p_session_hash bytea, p_now timestamptz) RETURNS uuid
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT s.identity_id FROM identity.sessions s JOIN platform.staff_members st ON st.identity_id = s.identity_id
       WHERE s.token_hash = p_session_hash AND s.revoked_at IS NULL AND s.expires_at > p_now AND st.revoked_at IS NULL
    $$;

    -- Keyset pages, newest first, by (since, id); destinations only ever masked.
    CREATE FUNCTION outbox.suppression_page(p_session_hash bytea, p_now timestamptz, p_limit integer, p_after_since timestamptz, p_after_id uuid)
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

    -- Lifts one suppression and records who did it, in the caller's transaction; false when there
    -- is no such suppression.
    CREATE FUNCTION outbox.lift_suppression(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
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

    -- Per purpose and event over a window, for the backlog answer and the web's metrics.
    CREATE FUNCTION outbox.delivery_events_since(p_since timestamptz) RETURNS TABLE (purpose text, event text, count bigint)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT m.purpose, e.event, count(*) FROM outbox.security_outbox_delivery_events e
        JOIN outbox.security_outbox_messages m ON m.id = e.message_id
       WHERE e.received_at >= p_since GROUP BY m.purpose, e.event
    $$;

    REVOKE ALL ON FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text),
      outbox.staff_identity(bytea, timestamptz), outbox.suppression_page(bytea, timestamptz, integer, timestamptz, uuid),
      outbox.lift_suppression(bytea, timestamptz, uuid), outbox.delivery_events_since(timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text),
      outbox.suppression_page(bytea, timestamptz, integer, timestamptz, uuid), outbox.lift_suppression(bytea, timestamptz, uuid),
      outbox.delivery_events_since(timestamptz) TO sealpost_api;
    -- The worker checks a claimed message's destination against the list, nothing more.
    GRANT SELECT (destination_hmac) ON outbox.suppressed_destinations TO sealpost_worker;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.delivery_events_since(timestamptz);
    DROP FUNCTION outbox.lift_suppression(bytea, timestamptz, uuid);
    DROP FUNCTION outbox.suppression_page(bytea, timestamptz, integer, timestamptz, uuid);
    DROP FUNCTION outbox.staff_identity(bytea, timestamptz);
    DROP FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text);
    DROP TABLE outbox.suppressed_destinations, outbox.security_outbox_delivery_events;
    DROP INDEX outbox.attempts_provider_message_id_idx;
    ALTER TABLE outbox.security_outbox_messages DROP COLUMN destination_hmac;
    DELETE FROM outbox.security_outbox_dead_letters WHERE reason = 'destination_suppressed';
    ALTER TABLE outbox.security_outbox_dead_letters DROP CONSTRAINT security_outbox_dead_letters_reason_check;
    ALTER TABLE outbox.security_outbox_dead_letters ADD CONSTRAINT security_outbox_dead_letters_reason_check CHECK (reason IN (
      'provider_rejected', 'retries_exhausted', 'challenge_expired', 'challenge_consumed', 'decryption_failed',
      'superseded_by_resend', 'worker_crash_loop', 'invitation_revoked', 'invitation_accepted', 'invitation_expired'));
  `)
}
