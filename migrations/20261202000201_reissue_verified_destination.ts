import type { Knex } from 'knex'

/**
 * A reissue sends only to the challenge's own identifier, never to the message row's destination
 * (a stolen worker login cannot point a code elsewhere). `outbox.reissue_candidate` now also refuses:
 * - `reissue_refused_decryption_failed`: the envelope did not open, so the row (or the key) was
 *   tampered with or lost; a human looks at why before anything is sent again;
 * - `reissue_destination_mismatch`: the row's destination or channel is not the challenge's login
 *   identifier (a row edited by the owner with the trigger off, or restored from a backup); the web
 *   logs it as a security event;
 * - `security_notice_message`, decided here now as well: a notice has no challenge to compare with.
 * It returns the identifier's value as the destination. Same signature and columns, so the
 * previous release's web keeps calling it (an unknown refusal is still its 409 with that code).
 * Redefines the function of 20261201000200_staff_session_functions; `down` restores that one.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.reissue_candidate(p_session_token_hash bytea, p_message_id uuid, p_now timestamptz)
      RETURNS TABLE (refusal text, purpose text, challenge_id uuid, channel text, destination text, locale text, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid;
      m record;
      d record;
      c record;
      li record;
    BEGIN
      staff := platform.staff_identity_for_session(p_session_token_hash, p_now);
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id FOR UPDATE;
      SELECT * INTO d FROM outbox.security_outbox_dead_letters WHERE message_id = p_message_id;
      IF m.id IS NULL OR d.message_id IS NULL THEN RETURN QUERY SELECT 'dead_letter_not_found', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF m.purpose = 'invitation' THEN RETURN QUERY SELECT 'invitation_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF m.purpose = 'security_notice' THEN RETURN QUERY SELECT 'security_notice_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF d.reason = 'provider_rejected' THEN
        RETURN QUERY SELECT 'reissue_refused_provider_rejected', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      IF d.reason = 'decryption_failed' THEN
        RETURN QUERY SELECT 'reissue_refused_decryption_failed', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      IF d.reason IN ('superseded_by_resend', 'challenge_expired', 'challenge_consumed') THEN
        RETURN QUERY SELECT d.reason, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      SELECT * INTO c FROM identity.challenges WHERE id = m.challenge_id FOR UPDATE;
      -- Before any other refusal, so a tampered row is always reported as one.
      SELECT kind, value INTO li FROM identity.login_identifiers WHERE id = c.login_identifier_id;
      IF li.value IS DISTINCT FROM m.destination OR (li.kind = 'email') IS DISTINCT FROM (m.channel = 'email') THEN
        RETURN QUERY SELECT 'reissue_destination_mismatch', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      IF c.identity_id = staff THEN RETURN QUERY SELECT 'own_message', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.consumed_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_consumed', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.revoked_at IS NOT NULL THEN RETURN QUERY SELECT 'challenge_revoked', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.expires_at <= p_now THEN RETURN QUERY SELECT 'challenge_expired', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF c.attempts_left <= 0 THEN RETURN QUERY SELECT 'challenge_out_of_attempts', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN; END IF;
      IF EXISTS (SELECT FROM outbox.security_outbox_messages n
                  WHERE n.purpose = m.purpose AND n.destination = li.value AND n.id > m.id
                    AND n.state IN ('pending', 'leased', 'published')) THEN
        RETURN QUERY SELECT 'newer_message_exists', NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::timestamptz; RETURN;
      END IF;
      RETURN QUERY SELECT NULL::text, m.purpose, m.challenge_id, m.channel, li.value, m.locale, c.expires_at;
    END $$;
  `)
}

export async function down(knex: Knex): Promise<void> {
  // As 20261201000200_staff_session_functions defined it.
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.reissue_candidate(p_session_token_hash bytea, p_message_id uuid, p_now timestamptz)
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
  `)
}
