import type { Knex } from 'knex'

/**
 * Twilio's status callbacks in `outbox.record_delivery_event` (8-argument form), two changes:
 * - An event is matched on the channel its attempt went out on (`attempts.channel`, which a phone
 *   fallback may set to a later phone channel than the message's own), or the message's channel for
 *   attempts written before that column: an SMS callback finds a WhatsApp message sent by SMS.
 * - `p_occurred_at` may be NULL: Twilio's callback carries no time, and a replay must hit the
 *   `delivery_events_once` key, so such an event (and the suppression it proves) is dated by the
 *   attempt it answers; `received_at` says when we heard of it.
 * The previous release never passes NULL and its events match as before (its attempts carry no
 * channel), so its web keeps working. Literal values only (CONVENTIONS §10).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
                                                            p_occurred_at timestamptz, p_received_at timestamptz, p_suppress_reason text,
                                                            p_recipient_hmacs bytea[])
      RETURNS TABLE (outcome text, message_id uuid, purpose text, suppressed boolean)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      inserted integer;
      proven boolean;
    BEGIN
      SELECT msg.id, msg.purpose, msg.channel, msg.destination, msg.destination_hmac, coalesce(p_occurred_at, a.attempted_at) AS occurred_at INTO m
        FROM outbox.security_outbox_attempts a JOIN outbox.security_outbox_messages msg ON msg.id = a.message_id
       WHERE a.provider_message_id = p_provider_message_id AND coalesce(a.channel, msg.channel) = p_channel
       ORDER BY a.attempted_at DESC LIMIT 1;
      IF m.id IS NULL THEN
        RETURN QUERY SELECT 'unknown_message'::text, NULL::uuid, NULL::text, false; RETURN;
      END IF;
      INSERT INTO outbox.security_outbox_delivery_events (message_id, event, subtype, occurred_at, received_at)
        VALUES (m.id, p_event, p_subtype, m.occurred_at, p_received_at)
        ON CONFLICT ON CONSTRAINT delivery_events_once DO NOTHING;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      -- The event proves something only about the address it names: the message's own.
      proven := p_suppress_reason IS NOT NULL AND m.destination_hmac IS NOT NULL
                AND m.destination_hmac = ANY (coalesce(p_recipient_hmacs, '{}'::bytea[]));
      IF proven THEN
        INSERT INTO outbox.suppressed_destinations AS s (id, destination_hmac, channel, masked_destination, reason, since, message_id)
          VALUES (gen_random_uuid(), m.destination_hmac, m.channel, outbox.mask_destination(m.destination), p_suppress_reason, m.occurred_at, m.id)
          ON CONFLICT (destination_hmac) DO UPDATE SET reason = EXCLUDED.reason, since = EXCLUDED.since, message_id = EXCLUDED.message_id
            WHERE s.reason = 'complaint' AND EXCLUDED.reason = 'permanent_bounce';
      END IF;
      RETURN QUERY SELECT CASE WHEN inserted > 0 THEN 'stored' ELSE 'duplicate' END, m.id, m.purpose, proven;
    END $$;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.record_delivery_event(p_channel text, p_provider_message_id text, p_event text, p_subtype text,
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
  `)
}
