import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Console gaps: staff functions, each checking the staff session itself through
 * `platform.staff_identity_for_session` and returning masked destinations only. The web gains
 * EXECUTE on these functions and nothing else.
 *
 * - `outbox.messages_by_destination`: messages found through `destination_hmac`, the keyed hash the
 *   suppression list uses, computed by the web from what staff typed (under every code-hash key);
 *   never a scan of destinations. The index below serves it. Messages enqueued before
 *   20261201000500 carry no hash and are not found; the database holds no key to backfill them,
 *   and retention sweeps them within days. Every release since writes the hash on enqueue.
 * - `outbox.delivery_event_counts`: provider events per provider, channel and event since a moment.
 * - `outbox.redrive_candidates`: the dead letters of one reason, oldest first, a keyset page; each
 *   is then checked and reissued by `outbox.reissue_candidate`, the single reissue's own rules.
 * - `outbox.channel_pauses`, `outbox.lift_channel_pause`, `outbox.lift_provider_hold`: see and end a
 *   throttle pause or an outage hold, audited; both call the channel's held messages back through
 *   `outbox.release_held_jobs`, the statement a provider's first successful probe runs (the worker
 *   now calls the function too: one home). plpgsql: pg-boss's schema is installed after the
 *   migrations, so bodies that name `pgboss.job` resolve at call time.
 *
 * New objects only: the previous release's web and worker never call them (its worker keeps its own
 * copy of the release statement).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX messages_destination_hmac_idx ON outbox.security_outbox_messages (destination_hmac) WHERE destination_hmac IS NOT NULL;

    CREATE FUNCTION outbox.messages_by_destination(p_session_token_hash bytea, p_now timestamptz, p_hmacs bytea[], p_limit integer, p_before_id uuid)
      RETURNS TABLE (message_id uuid, purpose text, channel text, masked_destination text, state text, attempt_count integer,
                     created_at timestamptz, expires_at timestamptz, last_failure_class text, dead_letter_reason text, providers text[])
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      IF cardinality(p_hmacs) > 16 OR p_limit NOT BETWEEN 1 AND 101 THEN
        RAISE EXCEPTION 'too many hashes or rows asked for' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      RETURN QUERY SELECT m.id, m.purpose, m.channel, outbox.mask_destination(m.destination), m.state, m.attempt_count,
             m.created_at, m.expires_at,
             (SELECT a.failure_class FROM outbox.security_outbox_attempts a
               WHERE a.message_id = m.id AND a.failure_class IS NOT NULL ORDER BY a.attempt_no DESC LIMIT 1),
             d.reason,
             ARRAY(SELECT a.provider FROM outbox.security_outbox_attempts a
                    WHERE a.message_id = m.id AND a.provider IS NOT NULL ORDER BY a.attempt_no)
        FROM outbox.security_outbox_messages m
        LEFT JOIN outbox.security_outbox_dead_letters d ON d.message_id = m.id
       WHERE m.destination_hmac = ANY (p_hmacs) AND (p_before_id IS NULL OR m.id < p_before_id)
       ORDER BY m.id DESC
       LIMIT p_limit;
    END $$;

    CREATE FUNCTION outbox.delivery_event_counts(p_session_token_hash bytea, p_now timestamptz, p_since timestamptz)
      RETURNS TABLE (provider text, channel text, event text, count bigint)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      -- The provider is the one whose published attempt the event was matched by.
      RETURN QUERY SELECT coalesce(a.provider, 'unknown'), m.channel, e.event, count(*)
        FROM outbox.security_outbox_delivery_events e
        JOIN outbox.security_outbox_messages m ON m.id = e.message_id
        LEFT JOIN outbox.security_outbox_attempts a ON a.message_id = e.message_id AND a.outcome = 'published'
       WHERE e.received_at >= p_since AND e.received_at <= p_now
       GROUP BY 1, 2, 3
       ORDER BY 1, 2, 3;
    END $$;

    CREATE FUNCTION outbox.redrive_candidates(p_session_token_hash bytea, p_now timestamptz, p_reason text, p_limit integer, p_after_id uuid)
      RETURNS TABLE (message_id uuid)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      IF p_limit NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'too many rows asked for' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      RETURN QUERY SELECT d.message_id FROM outbox.security_outbox_dead_letters d
       WHERE d.reason = p_reason AND (p_after_id IS NULL OR d.message_id > p_after_id)
       ORDER BY d.message_id
       LIMIT p_limit;
    END $$;

    -- A provider is back (or staff say so): the channel's held messages go out at once, soonest
    -- expiry first (src/outbox/pgboss-jobs-sql.ts, releaseHeldJobsTx, says why each clause).
    CREATE FUNCTION outbox.release_held_jobs(p_channel text, p_now timestamptz, p_queue text) RETURNS integer
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      released integer;
    BEGIN
      WITH held AS (
        SELECT m.id, m.job_id, m.expires_at
          FROM outbox.security_outbox_messages m
         WHERE m.state = 'pending' AND m.available_at > p_now AND m.channel = p_channel AND m.expires_at > p_now
           FOR UPDATE OF m SKIP LOCKED
      ), jobs AS (
        UPDATE pgboss.job j
           SET start_after = p_now,
               priority = 1 + GREATEST(0, 86400 - LEAST(86400, floor(extract(epoch FROM held.expires_at - p_now))))::integer
          FROM held
         WHERE j.name = p_queue AND j.id = held.job_id AND j.state = 'created'
        RETURNING held.id
      ), messages AS (
        UPDATE outbox.security_outbox_messages m SET available_at = p_now FROM jobs WHERE m.id = jobs.id
      )
      SELECT count(*) INTO released FROM jobs;
      RETURN released;
    END $$;

    CREATE FUNCTION outbox.channel_pauses(p_session_token_hash bytea, p_now timestamptz)
      RETURNS TABLE (channel text, paused_until timestamptz, throttle_streak integer)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT p.channel, p.paused_until, p.throttle_streak FROM outbox.provider_pauses p
       WHERE p.paused_until > p_now ORDER BY p.channel;
    END $$;

    -- Ends a running pause now; the throttle streak stays, so a provider still throttling backs off longer.
    CREATE FUNCTION outbox.lift_channel_pause(p_session_token_hash bytea, p_now timestamptz, p_channel text)
      RETURNS TABLE (lifted boolean, released integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      was record;
      called_back integer;
    BEGIN
      SELECT p.paused_until, p.throttle_streak INTO was FROM outbox.provider_pauses p
       WHERE p.channel = p_channel AND p.paused_until > p_now FOR UPDATE;
      IF was.paused_until IS NULL THEN RETURN QUERY SELECT false, 0; RETURN; END IF;
      UPDATE outbox.provider_pauses SET paused_until = p_now, updated_at = p_now WHERE provider_pauses.channel = p_channel;
      called_back := outbox.release_held_jobs(p_channel, p_now, 'security-outbox');
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'security_outbox.channel_pause_lifted', p_channel,
                jsonb_build_object('pausedUntil', was.paused_until, 'throttleStreak', was.throttle_streak, 'released', called_back));
      RETURN QUERY SELECT true, called_back;
    END $$;

    -- As the worker's record step does on the first answer from a provider held down (afterAnswer
    -- in src/outbox/provider-health.ts): the row back to up, its streak and probe schedule cleared.
    CREATE FUNCTION outbox.lift_provider_hold(p_session_token_hash bytea, p_now timestamptz, p_provider text)
      RETURNS TABLE (lifted boolean, released integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      was record;
      called_back integer;
    BEGIN
      SELECT s.channel, s.down_since, s.failure_streak INTO was FROM outbox.provider_states s
       WHERE s.provider = p_provider AND s.state = 'down' FOR UPDATE;
      IF was.channel IS NULL THEN RETURN QUERY SELECT false, 0; RETURN; END IF;
      UPDATE outbox.provider_states
         SET state = 'up', failure_streak = 0, down_since = NULL, probe_interval_ms = NULL, next_probe_at = NULL,
             probe_until = NULL, updated_at = p_now
       WHERE provider = p_provider;
      called_back := outbox.release_held_jobs(was.channel, p_now, 'security-outbox');
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'security_outbox.provider_hold_lifted', p_provider,
                jsonb_build_object('channel', was.channel, 'downSince', was.down_since, 'failureStreak', was.failure_streak,
                                   'released', called_back));
      RETURN QUERY SELECT true, called_back;
    END $$;

    REVOKE ALL ON FUNCTION outbox.messages_by_destination(bytea, timestamptz, bytea[], integer, uuid),
      outbox.delivery_event_counts(bytea, timestamptz, timestamptz),
      outbox.redrive_candidates(bytea, timestamptz, text, integer, uuid),
      outbox.release_held_jobs(text, timestamptz, text),
      outbox.channel_pauses(bytea, timestamptz),
      outbox.lift_channel_pause(bytea, timestamptz, text),
      outbox.lift_provider_hold(bytea, timestamptz, text) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.messages_by_destination(bytea, timestamptz, bytea[], integer, uuid),
      outbox.delivery_event_counts(bytea, timestamptz, timestamptz),
      outbox.redrive_candidates(bytea, timestamptz, text, integer, uuid),
      outbox.channel_pauses(bytea, timestamptz),
      outbox.lift_channel_pause(bytea, timestamptz, text),
      outbox.lift_provider_hold(bytea, timestamptz, text) TO ${API_ROLE};
    GRANT EXECUTE ON FUNCTION outbox.release_held_jobs(text, timestamptz, text) TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.lift_provider_hold(bytea, timestamptz, text);
    DROP FUNCTION outbox.lift_channel_pause(bytea, timestamptz, text);
    DROP FUNCTION outbox.channel_pauses(bytea, timestamptz);
    DROP FUNCTION outbox.release_held_jobs(text, timestamptz, text);
    DROP FUNCTION outbox.redrive_candidates(bytea, timestamptz, text, integer, uuid);
    DROP FUNCTION outbox.delivery_event_counts(bytea, timestamptz, timestamptz);
    DROP FUNCTION outbox.messages_by_destination(bytea, timestamptz, bytea[], integer, uuid);
    DROP INDEX outbox.messages_destination_hmac_idx;
  `)
}
