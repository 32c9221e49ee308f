import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * The phone fallback (docs/delivery.md "Phone channels").
 *
 * `outbox.message_history` shows each attempt's channel beside its provider, so staff see the path
 * a code took (whatsapp_cloud on whatsapp, then twilio on sms); an attempt written before attempts
 * named their channel, or by the previous release's worker, went out on its message's channel.
 * Same signature and shape plus one key, so the previous release's web reads it unchanged.
 *
 * `outbox.phone_fallback_candidate`: everything the web must check, under the challenge's lock held
 * to the caller's COMMIT, before it sends a new code on the next phone channel because a status
 * webhook said the channel a published code went out on cannot reach the number. The old code's
 * ciphertext is gone once published, so the web issues a new code for the same challenge (the old
 * one stops verifying: one usable code) to the challenge's own identifier. A refusal is a code,
 * never an error: a phone code of a live challenge, published, last sent on the failed channel,
 * with no newer message for its challenge (so a replayed webhook does nothing the second time).
 * The web role gains EXECUTE only, never UPDATE on messages.
 */
const HISTORY_WITH = (attemptKeys: string) => `
    CREATE OR REPLACE FUNCTION outbox.message_history(p_session_token_hash bytea, p_message_id uuid) RETURNS jsonb
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      result jsonb;
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, now());
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id;
      IF m.id IS NULL THEN RETURN NULL; END IF;
      SELECT jsonb_build_object(
        'message', jsonb_build_object(
          'messageId', m.id, 'purpose', m.purpose, 'channel', m.channel, 'maskedDestination', outbox.mask_destination(m.destination),
          'locale', m.locale, 'state', m.state, 'attemptCount', m.attempt_count, 'createdAt', m.created_at, 'availableAt', m.available_at,
          'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at, 'expiresAt', m.expires_at),
        'attempts', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'attemptNo', a.attempt_no, ${attemptKeys}'provider', a.provider, 'outcome', a.outcome, 'failureClass', a.failure_class,
            'providerMessageId', a.provider_message_id, 'retryAfterAt', a.retry_after_at, 'durationMs', a.duration_ms,
            'attemptedAt', a.attempted_at) ORDER BY a.attempt_no)
          FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb),
        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'lastFailureClass', d.last_failure_class, 'deadLetteredAt', d.dead_lettered_at)
          FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id),
        'events', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'event', e.event, 'subtype', e.subtype, 'occurredAt', e.occurred_at, 'receivedAt', e.received_at) ORDER BY e.occurred_at, e.id)
          FROM outbox.security_outbox_delivery_events e WHERE e.message_id = m.id), '[]'::jsonb))
        INTO result;
      RETURN result;
    END $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ${HISTORY_WITH(`'channel', coalesce(a.channel, m.channel), `)}

    CREATE FUNCTION outbox.phone_fallback_candidate(p_message_id uuid, p_failed_channel text, p_next_channel text, p_now timestamptz)
      RETURNS TABLE (refusal text, purpose text, challenge_id uuid, destination text, locale text, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      c record;
      li record;
      last_channel text;
    BEGIN
      IF p_failed_channel NOT IN ('whatsapp', 'sms') OR p_next_channel NOT IN ('whatsapp', 'sms') OR p_failed_channel = p_next_channel THEN
        RETURN QUERY SELECT 'not_a_phone_fallback', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id;
      IF m.id IS NULL OR m.challenge_id IS NULL OR m.channel NOT IN ('whatsapp', 'sms') THEN
        RETURN QUERY SELECT 'not_a_phone_code', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      -- The challenge first, locked to COMMIT: two webhooks for one message queue here, and the second sees the first's message.
      SELECT * INTO c FROM identity.challenges WHERE id = m.challenge_id FOR UPDATE;
      IF m.state <> 'published' THEN
        RETURN QUERY SELECT 'not_published', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      SELECT coalesce(a.channel, m.channel) INTO last_channel FROM outbox.security_outbox_attempts a
       WHERE a.message_id = m.id AND a.outcome = 'published' ORDER BY a.attempt_no DESC LIMIT 1;
      IF last_channel IS DISTINCT FROM p_failed_channel THEN
        RETURN QUERY SELECT 'not_sent_on_failed_channel', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      -- A row that names another number than its challenge's identifier gets nothing (the edited-destination attack).
      SELECT kind, value INTO li FROM identity.login_identifiers WHERE id = c.login_identifier_id;
      IF li.kind IS DISTINCT FROM 'phone' OR li.value IS DISTINCT FROM m.destination THEN
        RETURN QUERY SELECT 'destination_mismatch', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      -- Expiry wins over everything that could still make the code usable.
      IF c.expires_at <= p_now THEN RETURN QUERY SELECT 'challenge_expired', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.consumed_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_consumed', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.revoked_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_revoked', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.attempts_left <= 0 THEN RETURN QUERY SELECT 'challenge_out_of_attempts', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF EXISTS (SELECT FROM outbox.security_outbox_messages n WHERE n.challenge_id = m.challenge_id AND n.id > m.id) THEN
        RETURN QUERY SELECT 'newer_message_exists', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      RETURN QUERY SELECT NULL::text, m.purpose, m.challenge_id, li.value, m.locale, c.expires_at;
    END $$;
    REVOKE ALL ON FUNCTION outbox.phone_fallback_candidate(uuid, text, text, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.phone_fallback_candidate(uuid, text, text, timestamptz) TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.phone_fallback_candidate(uuid, text, text, timestamptz);
    ${HISTORY_WITH('')}
  `)
}
