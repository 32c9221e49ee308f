import type { Knex } from 'knex'

/**
 * A bounce or a complaint suppresses only the exact address it names.
 * Literal values only (CONVENTIONS §10).
 *
 * - `outbox.record_delivery_event` gains `p_recipient_hmacs`: the HMACs the web computed of the
 *   addresses the provider's event names (under every code-hash key). The message's destination is
 *   suppressed only when its `destination_hmac` is among them, so an event about another address
 *   suppresses nothing (it is still stored). A permanent bounce upgrades a complaint's row.
 * - From this release the web writes `destination_hmac` over the exact address (lower-cased), not
 *   the canonical mailbox, with the same HMAC input as before: for an address with no `+tag` (and
 *   no Gmail dots) both forms are the same bytes, so one column and one check serve both releases
 *   and no second form is checked. Side by side with the previous release: its web's messages to
 *   a variant carry the mailbox's HMAC, which no recipient HMAC equals, so a bounce of one of them
 *   suppresses nothing (the next message bounces once more and is suppressed then); its web's
 *   webhook calls the old signature, which now stores the event and suppresses nothing, having no
 *   recipient to prove it; its worker still reads only `destination_hmac` and stops complaint rows
 *   for every purpose until it is replaced.
 * - The worker may read `reason`: a complaint stops only mail nobody at the address asked for.
 * - Existing rows were keyed on a canonical mailbox. One whose message went to that mailbox as
 *   written is the same bytes as its exact key and stays; one whose message went to a variant, or
 *   whose message is gone (nothing says which address bounced), proves nothing about the mailbox
 *   it silences, and is lifted with an audit record (actor `migration:20261202000300`). A real
 *   bounce of such an address costs one more bounce, after which it is suppressed exactly.
 *   `down` does not bring those rows back.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
                                                 p_occurred_at timestamptz, p_received_at timestamptz, p_suppress_reason text,
                                                 p_recipient_hmacs bytea[])
      RETURNS TABLE (outcome text, message_id uuid, purpose text, suppressed boolean)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      inserted integer;
      proven boolean;
    BEGIN
      SELECT msg.id, msg.purpose, msg.channel, msg.destination, msg.destination_hmac INTO m
        FROM outbox.security_outbox_attempts a JOIN outbox.security_outbox_messages msg ON msg.id = a.message_id
       WHERE a.provider_message_id = p_provider_message_id AND msg.channel = p_channel
       ORDER BY a.attempted_at DESC LIMIT 1;
      IF m.id IS NULL THEN
        RETURN QUERY SELECT 'unknown_message'::text, NULL::uuid, NULL::text, false; RETURN;
      END IF;
      INSERT INTO outbox.security_outbox_delivery_events (message_id, event, subtype, occurred_at, received_at)
        VALUES (m.id, p_event, p_subtype, p_occurred_at, p_received_at)
        ON CONFLICT ON CONSTRAINT delivery_events_once DO NOTHING;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      -- The event proves something only about the address it names: the message's own.
      proven := p_suppress_reason IS NOT NULL AND m.destination_hmac IS NOT NULL
                AND m.destination_hmac = ANY (coalesce(p_recipient_hmacs, '{}'::bytea[]));
      IF proven THEN
        INSERT INTO outbox.suppressed_destinations AS s (id, destination_hmac, channel, masked_destination, reason, since, message_id)
          VALUES (gen_random_uuid(), m.destination_hmac, m.channel, outbox.mask_destination(m.destination), p_suppress_reason, p_occurred_at, m.id)
          ON CONFLICT (destination_hmac) DO UPDATE SET reason = EXCLUDED.reason, since = EXCLUDED.since, message_id = EXCLUDED.message_id
            WHERE s.reason = 'complaint' AND EXCLUDED.reason = 'permanent_bounce';
      END IF;
      RETURN QUERY SELECT CASE WHEN inserted > 0 THEN 'stored' ELSE 'duplicate' END, m.id, m.purpose, proven;
    END $$;

    -- The previous release's webhook: stores the event; it names no recipient, so it suppresses nothing.
    CREATE OR REPLACE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
                                                            p_occurred_at timestamptz, p_received_at timestamptz, p_suppress_reason text)
      RETURNS TABLE (outcome text, message_id uuid, purpose text)
      LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT r.outcome, r.message_id, r.purpose
        FROM outbox.record_delivery_event(p_channel, p_provider_message_id, p_event, p_subtype, p_occurred_at, p_received_at,
                                          p_suppress_reason, '{}'::bytea[]) r
    $$;

    REVOKE ALL ON FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text, bytea[]) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text, bytea[]) TO sealpost_api;
    GRANT SELECT (reason) ON outbox.suppressed_destinations TO sealpost_worker;

    WITH unproven AS (
      DELETE FROM outbox.suppressed_destinations s
       WHERE s.channel = 'email'
         AND NOT EXISTS (
           SELECT FROM outbox.security_outbox_messages m
            WHERE m.id = s.message_id
              AND lower(btrim(m.destination)) !~ '^[^+@]+[+][^@]*@'
              AND lower(btrim(m.destination)) !~ '@googlemail[.]com$'
              AND lower(btrim(m.destination)) !~ '^[^@]*[.][^@]*@gmail[.]com$')
      RETURNING s.id, s.reason, s.channel, s.since)
    INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
      SELECT gen_random_uuid(), now(), 'migration:20261202000300', 'security_outbox.suppression_lifted', id::text,
             jsonb_build_object('reason', reason, 'channel', channel, 'since', since, 'why', 'keyed on a mailbox it did not prove')
        FROM unproven;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE SELECT (reason) ON outbox.suppressed_destinations FROM sealpost_worker;
    CREATE OR REPLACE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
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
    DROP FUNCTION outbox.record_delivery_event(text, text, text, text, timestamptz, timestamptz, text, bytea[]);
  `)
}
