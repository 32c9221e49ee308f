import type { Knex } from 'knex'

/**
 * One message's history gains the provider's delivery events (delivered, bounced, complained…),
 * and checks the staff session through the one shared check (which also requires the identity to be
 * active), instead of a copy of it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
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
            'attemptNo', a.attempt_no, 'outcome', a.outcome, 'failureClass', a.failure_class, 'providerMessageId', a.provider_message_id,
            'retryAfterAt', a.retry_after_at, 'durationMs', a.duration_ms, 'attemptedAt', a.attempted_at) ORDER BY a.attempt_no)
          FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb),
        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'lastFailureClass', d.last_failure_class, 'deadLetteredAt', d.dead_lettered_at)
          FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id),
        'events', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'event', e.event, 'subtype', e.subtype, 'occurredAt', e.occurred_at, 'receivedAt', e.received_at) ORDER BY e.occurred_at, e.id)
          FROM outbox.security_outbox_delivery_events e WHERE e.message_id = m.id), '[]'::jsonb))
        INTO result;
      RETURN result;
    END $$;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.message_history(p_session_token_hash bytea, p_message_id uuid) RETURNS jsonb
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      result jsonb;
    BEGIN
      IF NOT EXISTS (SELECT FROM identity.sessions s JOIN platform.staff_members sm ON sm.identity_id = s.identity_id
                      WHERE s.token_hash = p_session_token_hash AND s.revoked_at IS NULL AND s.expires_at > now()
                        AND sm.revoked_at IS NULL) THEN
        RAISE EXCEPTION 'a live staff session is required' USING ERRCODE = 'insufficient_privilege';
      END IF;
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id;
      IF m.id IS NULL THEN RETURN NULL; END IF;
      SELECT jsonb_build_object(
        'message', jsonb_build_object(
          'messageId', m.id, 'purpose', m.purpose, 'channel', m.channel, 'maskedDestination', outbox.mask_destination(m.destination),
          'locale', m.locale, 'state', m.state, 'attemptCount', m.attempt_count, 'createdAt', m.created_at, 'availableAt', m.available_at,
          'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at, 'expiresAt', m.expires_at),
        'attempts', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'attemptNo', a.attempt_no, 'outcome', a.outcome, 'failureClass', a.failure_class, 'providerMessageId', a.provider_message_id,
            'retryAfterAt', a.retry_after_at, 'durationMs', a.duration_ms, 'attemptedAt', a.attempted_at) ORDER BY a.attempt_no)
          FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb),
        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'lastFailureClass', d.last_failure_class, 'deadLetteredAt', d.dead_lettered_at)
          FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id))
        INTO result;
      RETURN result;
    END $$;
  `)
}
