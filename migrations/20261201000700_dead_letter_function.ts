import type { Knex } from 'knex'

/**
 * Dead-lettering gets one home: `outbox.dead_letter_messages` sets the final state (bumping
 * attempt_count for a message whose failed attempt was just inserted), writes the dead-letter row
 * and erases the ciphertext, at the time it is given (`p_now`), for the open messages among those
 * named, and returns the ids it closed (a message already final is left alone and not returned). The worker calls it directly (SECURITY INVOKER: its own
 * grants apply); the web's two SECURITY DEFINER functions call it as their owner, and now take the
 * web's clock too. Their `p_now` defaults to now() only for a caller of the previous release (a
 * web process still running during a deploy); this release always passes its clock.
 *
 * Redefines outbox.dead_letter_open_messages (20261130000600) and
 * outbox.dead_letter_invitation_messages (20261130001000); `down` restores both as they were.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.dead_letter_messages(
      p_message_ids uuid[], p_reasons text[], p_last_failure_classes text[], p_attempted boolean[], p_now timestamptz
    ) RETURNS uuid[]
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      closed_ids uuid[];
    BEGIN
      IF cardinality(p_reasons) <> cardinality(p_message_ids) OR cardinality(p_last_failure_classes) <> cardinality(p_message_ids)
         OR cardinality(p_attempted) <> cardinality(p_message_ids) THEN
        RAISE EXCEPTION 'one reason, failure class and attempted flag per message' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      WITH letter AS (
        SELECT * FROM unnest(p_message_ids, p_reasons, p_last_failure_classes, p_attempted) AS l (id, reason, last_failure_class, attempted)
      ), closed AS (
        UPDATE outbox.security_outbox_messages m
           SET state = 'dead_lettered', dead_lettered_at = p_now,
               attempt_count = m.attempt_count + CASE WHEN letter.attempted THEN 1 ELSE 0 END
          FROM letter
         WHERE m.id = letter.id AND m.state IN ('pending', 'leased')
        RETURNING m.id, letter.reason, letter.last_failure_class
      ), letters AS (
        INSERT INTO outbox.security_outbox_dead_letters (message_id, reason, last_failure_class, dead_lettered_at)
        SELECT closed.id, closed.reason, closed.last_failure_class, p_now FROM closed
      ), erased AS (
        DELETE FROM outbox.security_outbox_ciphertexts c USING closed WHERE c.message_id = closed.id
      )
      SELECT coalesce(array_agg(closed.id), '{}') INTO closed_ids FROM closed;
      RETURN closed_ids;
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_messages(uuid[], text[], text[], boolean[], timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_messages(uuid[], text[], text[], boolean[], timestamptz) TO sealpost_worker;

    DROP FUNCTION outbox.dead_letter_open_messages(uuid, text);
    CREATE FUNCTION outbox.dead_letter_open_messages(p_challenge_id uuid, p_reason text, p_now timestamptz DEFAULT now()) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      ids uuid[];
    BEGIN
      IF p_reason NOT IN ('superseded_by_resend', 'challenge_consumed') THEN
        RAISE EXCEPTION 'reason % is not the web''s to give', p_reason USING ERRCODE = 'insufficient_privilege';
      END IF;
      -- The web's clock, within a skew of the database's: never a time that moves retention or the gauges.
      p_now := least(greatest(coalesce(p_now, now()), now() - interval '5 minutes'), now() + interval '5 minutes');
      ids := ARRAY(SELECT id FROM outbox.security_outbox_messages WHERE challenge_id = p_challenge_id AND state IN ('pending', 'leased'));
      RETURN cardinality(outbox.dead_letter_messages(
        ids, array_fill(p_reason, ARRAY[cardinality(ids)]), array_fill(NULL::text, ARRAY[cardinality(ids)]),
        array_fill(false, ARRAY[cardinality(ids)]), p_now));
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_open_messages(uuid, text, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_open_messages(uuid, text, timestamptz) TO sealpost_api;

    DROP FUNCTION outbox.dead_letter_invitation_messages(uuid, text);
    CREATE FUNCTION outbox.dead_letter_invitation_messages(p_invitation_id uuid, p_reason text, p_now timestamptz DEFAULT now()) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      ids uuid[];
    BEGIN
      IF p_reason NOT IN ('invitation_revoked', 'invitation_accepted') THEN
        RAISE EXCEPTION 'reason % is not the web''s to give', p_reason USING ERRCODE = 'insufficient_privilege';
      END IF;
      -- The web's clock, within a skew of the database's: never a time that moves retention or the gauges.
      p_now := least(greatest(coalesce(p_now, now()), now() - interval '5 minutes'), now() + interval '5 minutes');
      ids := ARRAY(SELECT id FROM outbox.security_outbox_messages WHERE invitation_id = p_invitation_id AND state IN ('pending', 'leased'));
      RETURN cardinality(outbox.dead_letter_messages(
        ids, array_fill(p_reason, ARRAY[cardinality(ids)]), array_fill(NULL::text, ARRAY[cardinality(ids)]),
        array_fill(false, ARRAY[cardinality(ids)]), p_now));
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text, timestamptz) TO sealpost_api;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.dead_letter_invitation_messages(uuid, text, timestamptz);
    CREATE FUNCTION outbox.dead_letter_invitation_messages(p_invitation_id uuid, p_reason text) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      affected integer;
    BEGIN
      IF p_reason NOT IN ('invitation_revoked', 'invitation_accepted') THEN
        RAISE EXCEPTION 'reason % is not the web''s to give', p_reason USING ERRCODE = 'insufficient_privilege';
      END IF;
      WITH closed AS (
        UPDATE outbox.security_outbox_messages
           SET state = 'dead_lettered', dead_lettered_at = now()
         WHERE invitation_id = p_invitation_id AND state IN ('pending', 'leased')
        RETURNING id
      ), letters AS (
        INSERT INTO outbox.security_outbox_dead_letters (message_id, reason, dead_lettered_at)
        SELECT id, p_reason, now() FROM closed
      ), erased AS (
        DELETE FROM outbox.security_outbox_ciphertexts c USING closed WHERE c.message_id = closed.id
      )
      SELECT count(*) INTO affected FROM closed;
      RETURN affected;
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text) TO sealpost_api;

    DROP FUNCTION outbox.dead_letter_open_messages(uuid, text, timestamptz);
    CREATE FUNCTION outbox.dead_letter_open_messages(p_challenge_id uuid, p_reason text) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      affected integer;
    BEGIN
      IF p_reason NOT IN ('superseded_by_resend', 'challenge_consumed') THEN
        RAISE EXCEPTION 'reason % is not the web''s to give', p_reason USING ERRCODE = 'insufficient_privilege';
      END IF;
      WITH closed AS (
        UPDATE outbox.security_outbox_messages
           SET state = 'dead_lettered', dead_lettered_at = now()
         WHERE challenge_id = p_challenge_id AND state IN ('pending', 'leased')
        RETURNING id
      ), letters AS (
        INSERT INTO outbox.security_outbox_dead_letters (message_id, reason, dead_lettered_at)
        SELECT id, p_reason, now() FROM closed
      ), erased AS (
        DELETE FROM outbox.security_outbox_ciphertexts c USING closed WHERE c.message_id = closed.id
      )
      SELECT count(*) INTO affected FROM closed;
      RETURN affected;
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_open_messages(uuid, text) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_open_messages(uuid, text) TO sealpost_api;

    DROP FUNCTION outbox.dead_letter_messages(uuid[], text[], text[], boolean[], timestamptz);
  `)
}
