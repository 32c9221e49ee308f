import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * One message's history for the operator console (`GET /platform-admin/security-outbox/messages/:id`):
 * the message with its destination masked, its attempts and its dead letter, as one jsonb value.
 * Like every staff function (DESIGN §7) it verifies a live staff session itself, from the SHA-256
 * of the session token, and judges liveness by the database's own clock: a web process that was
 * taken over, holding no staff session, reads nothing (42501), whatever time or id it passes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.message_history(p_session_token_hash bytea, p_message_id uuid) RETURNS jsonb
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
    REVOKE ALL ON FUNCTION outbox.message_history(bytea, uuid) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.message_history(bytea, uuid) TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION outbox.message_history(bytea, uuid)')
}
