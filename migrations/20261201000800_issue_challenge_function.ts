import type { Knex } from 'knex'

/**
 * The enqueue path as server-side functions, so a request costs a few round trips instead of a
 * dozen (bench/README.md "What bounds each target"). All three are SECURITY INVOKER: the web's own
 * grants apply, nothing is gained by calling them; they only save the round trips.
 *
 * - `platform.rate_limit_window(keys, max, window, now, spend)`: a sliding-window bucket. Locks
 *   every key (advisory locks on the key's first 8 bytes as a signed bigint, ascending, so two key
 *   rings cannot deadlock; the same lock ids the web took before), then, in a statement of its own
 *   (a VOLATILE function takes a new snapshot per statement under READ COMMITTED, so the count sees
 *   every hit committed before the lock was granted), drops the expired hits, counts the live ones
 *   (at most `max` per key: none is counted past it) and, with `spend`, counts one more under the first key when there is room. Returns
 *   the seconds until there is room again, or NULL while there was room.
 * - `outbox.enqueue_message(p)`: the message, its sealed envelope and its pg-boss job, through
 *   `outbox.insert_delivery_job(json)`, which the release step builds from pg-boss's own INSERT for
 *   the delivery queue on every release (src/db/release.ts: it follows pg-boss's version, so it is
 *   not frozen here); the JSON is the job as `boss.send` would write it. The job inserted must be
 *   the one the message names. `outbox.notify_delivery_workers()` (also built by the release) sends
 *   the notification that insert sends, for a rehearsal's job that was rolled back.
 * - `identity.issue_challenge(p)`: a challenge and its message. `visible` (signed-in routes):
 *   refusals raise SPR01 resend_too_soon, SPR02 too_many_resends, SPR03 rate_limited (destination),
 *   the seconds to wait in DETAIL. `hidden` (sign-up, recovery: an answer that must not tell whether
 *   an account exists): every path writes a claim (real with `claim` = 'insert', else rehearsed)
 *   and an issued challenge (real, or rehearsed when there is no subject, the destination is over
 *   its budget or the issue is refused), rehearsals in subtransactions rolled back (SPR00), so every
 *   path does the same statements; the outcome is returned, not raised.
 *
 * The code hash is computed by the caller (the key never reaches the database): for a new
 * challenge under `new_challenge_id`, for a resend under `open_challenge_id`, the open challenge the
 * caller read before the call. An open challenge found under the lock that is not that one was
 * opened since by a concurrent request: refused as a resend too soon.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION platform.rate_limit_window(p_keys bytea[], p_max integer, p_window_seconds integer, p_now timestamptz, p_spend boolean)
      RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      window_start timestamptz := p_now - make_interval(secs => p_window_seconds);
      live integer;
      oldest timestamptz;
    BEGIN
      IF coalesce(cardinality(p_keys), 0) = 0 THEN
        RAISE EXCEPTION 'a rate limit needs a bucket' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      PERFORM pg_advisory_xact_lock(k)
         FROM (SELECT DISTINCT ('x' || encode(substring(key FROM 1 FOR 8), 'hex'))::bit(64)::bigint AS k FROM unnest(p_keys) AS key ORDER BY 1) AS ordered;
      -- Sub-statements share one snapshot: the count does not see the expiry's deletes, hence its own bound.
      WITH expired AS (
        DELETE FROM platform.rate_limit_hits WHERE bucket_key = ANY (p_keys) AND hit_at <= window_start
      ), window_hits AS (
        -- No ORDER BY hit_at LIMIT: with it, a cached generic plan walks the age index through every
        -- live hit of every bucket. A bucket holds at most p_max hits per key (none is counted past it).
        SELECT hit_at FROM platform.rate_limit_hits WHERE bucket_key = ANY (p_keys) AND hit_at > window_start
      ), spent AS (
        INSERT INTO platform.rate_limit_hits (bucket_key, hit_at)
        SELECT p_keys[1], p_now WHERE p_spend AND (SELECT count(*) FROM window_hits) < p_max
      )
      SELECT count(*)::integer, min(hit_at) INTO live, oldest FROM window_hits;
      IF live < p_max OR oldest IS NULL THEN
        RETURN NULL;
      END IF;
      RETURN extract(epoch FROM oldest + make_interval(secs => p_window_seconds) - p_now);
    END $$;
    REVOKE ALL ON FUNCTION platform.rate_limit_window(bytea[], integer, integer, timestamptz, boolean) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.rate_limit_window(bytea[], integer, integer, timestamptz, boolean) TO sealpost_api;

    CREATE FUNCTION outbox.enqueue_message(p jsonb) RETURNS void
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      job_id uuid;
    BEGIN
      INSERT INTO outbox.security_outbox_messages
        (id, job_id, purpose, challenge_id, invitation_id, channel, destination, locale, destination_hmac, expires_at)
      VALUES ((p->>'message_id')::uuid, (p->>'job_id')::uuid, p->>'purpose', (p->>'challenge_id')::uuid, (p->>'invitation_id')::uuid,
              p->>'channel', p->>'destination', p->>'locale', decode(p->>'destination_hmac', 'hex'), (p->>'expires_at')::timestamptz);
      INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ((p->>'message_id')::uuid, p->>'envelope');
      job_id := outbox.insert_delivery_job(p->>'job_json');
      IF job_id IS DISTINCT FROM (p->>'job_id')::uuid THEN
        RAISE EXCEPTION 'the job inserted is not the message''s' USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END $$;
    REVOKE ALL ON FUNCTION outbox.enqueue_message(jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.enqueue_message(jsonb) TO sealpost_api;

    -- One issue for a subject: lock, open challenge, resend rules, (destination budget), challenge, message.
    CREATE FUNCTION identity.issue_challenge_for(p jsonb, p_identity_id uuid, p_login_identifier_id uuid, p_count_destination boolean)
      RETURNS uuid
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      now_at timestamptz := (p->>'now')::timestamptz;
      open_challenge record;
      wait_seconds double precision;
      challenge_id uuid;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('challenge:' || (p->>'purpose') || ':' || p_identity_id || ':' || p_login_identifier_id, 0));
      SELECT id, expires_at, resend_count, last_sent_at INTO open_challenge
        FROM identity.challenges
       WHERE purpose = p->>'purpose' AND identity_id = p_identity_id AND login_identifier_id = p_login_identifier_id
         AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > now_at AND attempts_left > 0
       ORDER BY created_at DESC LIMIT 1
         FOR UPDATE;
      IF FOUND THEN
        wait_seconds := extract(epoch FROM open_challenge.last_sent_at + make_interval(secs => (p->>'resend_interval_seconds')::integer) - now_at);
        IF wait_seconds > 0 THEN
          RAISE EXCEPTION 'resend_too_soon' USING ERRCODE = 'SPR01', DETAIL = wait_seconds::text;
        END IF;
        IF open_challenge.resend_count >= (p->>'max_resends')::integer THEN
          RAISE EXCEPTION 'too_many_resends' USING ERRCODE = 'SPR02', DETAIL = extract(epoch FROM open_challenge.expires_at - now_at)::text;
        END IF;
        IF open_challenge.id IS DISTINCT FROM (p->>'open_challenge_id')::uuid THEN
          RAISE EXCEPTION 'resend_too_soon' USING ERRCODE = 'SPR01', DETAIL = (p->>'resend_interval_seconds');
        END IF;
        challenge_id := open_challenge.id;
        UPDATE identity.challenges
           SET code_hash = decode(p->>'open_code_hash', 'hex'), expires_at = (p->>'expires_at')::timestamptz, last_sent_at = now_at,
               resend_count = resend_count + 1, candidate_password_hash = coalesce(p->>'candidate_password_hash', candidate_password_hash)
         WHERE id = challenge_id;
      ELSE
        challenge_id := (p->>'new_challenge_id')::uuid;
        INSERT INTO identity.challenges
          (id, purpose, identity_id, login_identifier_id, code_hash, expires_at, last_sent_at, created_at, candidate_password_hash)
        VALUES (challenge_id, p->>'purpose', p_identity_id, p_login_identifier_id, decode(p->>'new_code_hash', 'hex'),
                (p->>'expires_at')::timestamptz, now_at, now_at, p->>'candidate_password_hash');
      END IF;
      -- A resend supersedes the challenge's unsent messages; a new challenge has none, but makes the same call.
      PERFORM outbox.dead_letter_open_messages(challenge_id, 'superseded_by_resend', now_at);
      IF p_count_destination THEN
        wait_seconds := platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(p->'destination_buckets') AS k),
          (p->>'destination_max')::integer, (p->>'destination_window_seconds')::integer, now_at, true);
        IF wait_seconds IS NOT NULL THEN
          RAISE EXCEPTION 'rate_limited' USING ERRCODE = 'SPR03', DETAIL = wait_seconds::text;
        END IF;
      END IF;
      PERFORM outbox.enqueue_message((p->'message') || jsonb_build_object('challenge_id', challenge_id));
      -- The deferred checks of these rows (the outbox's constraint triggers, pg-boss's foreign keys)
      -- run here, not at COMMIT: a rehearsal rolled back would otherwise drop them, and a known
      -- identifier's commit would do work an unknown one's does not. Every deferrable constraint of
      -- the schema is INITIALLY DEFERRED, so ALL DEFERRED restores what was.
      SET CONSTRAINTS ALL IMMEDIATE;
      SET CONSTRAINTS ALL DEFERRED;
      RETURN challenge_id;
    END $$;
    REVOKE ALL ON FUNCTION identity.issue_challenge_for(jsonb, uuid, uuid, boolean) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION identity.issue_challenge_for(jsonb, uuid, uuid, boolean) TO sealpost_api;

    CREATE FUNCTION identity.issue_challenge(p jsonb) RETURNS jsonb
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      now_at timestamptz := (p->>'now')::timestamptz;
      subject_identity uuid := (p->>'identity_id')::uuid;
      subject_login uuid := (p->>'login_identifier_id')::uuid;
      throwaway_identity uuid := (p->>'throwaway_identity_id')::uuid;
      throwaway_login uuid := (p->>'throwaway_login_identifier_id')::uuid;
      outcome text := 'no_subject';
      wait_seconds double precision;
      challenge_id uuid;
      failure text;
    BEGIN
      IF p->>'mode' = 'visible' THEN
        challenge_id := identity.issue_challenge_for(p, subject_identity, subject_login, (p->>'count_destination')::boolean);
        RETURN jsonb_build_object('outcome', 'issued', 'challenge_id', challenge_id);
      END IF;
      IF p->>'mode' IS DISTINCT FROM 'hidden' THEN
        RAISE EXCEPTION 'mode is visible or hidden' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      -- The claim: inserted for a new sign-up, else rehearsed (none: the rehearsed issue below has its own).
      IF p->>'claim' IN ('insert', 'rehearse') THEN
        BEGIN
          INSERT INTO identity.identities (id, status, created_at)
          VALUES (CASE WHEN p->>'claim' = 'insert' THEN subject_identity ELSE throwaway_identity END, 'pending', now_at);
          INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at, created_at)
          VALUES (CASE WHEN p->>'claim' = 'insert' THEN subject_login ELSE throwaway_login END,
                  CASE WHEN p->>'claim' = 'insert' THEN subject_identity ELSE throwaway_identity END,
                  p->>'identifier_kind', p->>'identifier_value', NULL, now_at);
          IF p->>'claim' = 'rehearse' THEN
            RAISE EXCEPTION USING ERRCODE = 'SPR00';
          END IF;
        EXCEPTION WHEN SQLSTATE 'SPR00' THEN NULL;
        END;
      END IF;
      -- The destination's budget is spent first, whether or not there is a subject to issue for.
      wait_seconds := platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(p->'destination_buckets') AS k),
        (p->>'destination_max')::integer, (p->>'destination_window_seconds')::integer, now_at, true);
      IF wait_seconds IS NOT NULL THEN
        outcome := 'rate_limited';
      ELSIF subject_identity IS NOT NULL THEN
        BEGIN
          challenge_id := identity.issue_challenge_for(p, subject_identity, subject_login, false);
          RETURN jsonb_build_object('outcome', 'issued', 'challenge_id', challenge_id);
        EXCEPTION
          WHEN SQLSTATE 'SPR01' OR SQLSTATE 'SPR02' THEN
            outcome := SQLERRM;
          WHEN OTHERS THEN
            outcome := 'failed';
            failure := SQLSTATE;
        END;
      END IF;
      -- The rehearsed issue: a throw-away claim and its challenge, rolled back.
      BEGIN
        INSERT INTO identity.identities (id, status, created_at) VALUES (throwaway_identity, 'pending', now_at);
        INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at, created_at)
        VALUES (throwaway_login, throwaway_identity, p->>'identifier_kind', p->>'identifier_value', NULL, now_at);
        PERFORM identity.issue_challenge_for(p, throwaway_identity, throwaway_login, false);
        RAISE EXCEPTION USING ERRCODE = 'SPR00';
      EXCEPTION
        WHEN SQLSTATE 'SPR00' THEN NULL;
        WHEN OTHERS THEN
          failure := coalesce(failure, 'rehearsal ' || SQLSTATE);
      END;
      -- The rehearsed job's NOTIFY died with its subtransaction: the same notification, so the
      -- workers (and anyone LISTENing) are woken alike, and the commit takes NOTIFY's lock alike.
      PERFORM outbox.notify_delivery_workers();
      RETURN jsonb_build_object('outcome', outcome, 'retry_after_seconds', wait_seconds, 'failure', failure);
    END $$;
    REVOKE ALL ON FUNCTION identity.issue_challenge(jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION identity.issue_challenge(jsonb) TO sealpost_api;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION identity.issue_challenge(jsonb);
    DROP FUNCTION identity.issue_challenge_for(jsonb, uuid, uuid, boolean);
    DROP FUNCTION outbox.enqueue_message(jsonb);
    -- Built by the release step (src/db/release.ts), not by this migration; only their callers need them.
    DROP FUNCTION IF EXISTS outbox.insert_delivery_job(text);
    DROP FUNCTION IF EXISTS outbox.notify_delivery_workers();
    DROP FUNCTION platform.rate_limit_window(bytea[], integer, integer, timestamptz, boolean);
  `)
}
