import type { Knex } from 'knex'

/**
 * The courier API (docs/courier.md): outside identity systems hand Sealpost a message to deliver.
 *
 * - `platform.api_keys`: the keys staff issue, stored as the SHA-256 of their secret part only
 *   (the secret is 256 random bits: no salt or slow hash needed, as for sessions), with their
 *   scopes (purposes, channels), their own request rate and destination budget, and who made them.
 *   The web reads the columns it authenticates with and marks a key used; staff create, list,
 *   rotate and revoke through SECURITY DEFINER functions that check the staff session themselves
 *   and write the audit record in the same statement.
 * - Two generic purposes, `verification_code` and `magic_link`, for callers whose flows are not ours.
 * - `security_outbox_messages.api_key_id`: the key a courier message came from. Such a message
 *   belongs to no challenge or invitation (the caller owns the code); it lives until its own
 *   `expires_at`, which the claim and the expiry purge already read. The subject CHECK says so.
 * - `outbox.enqueue_message` writes `api_key_id` when given (same signature: the previous release's
 *   web calls it unchanged and writes NULL).
 * - `outbox.courier_message`: a message's state and attempts, destination masked, to its own key only.
 */
const SUBJECT_BEFORE = `CASE purpose
          WHEN 'invitation' THEN invitation_id IS NOT NULL AND challenge_id IS NULL
          WHEN 'security_notice' THEN invitation_id IS NULL AND challenge_id IS NULL
          ELSE challenge_id IS NOT NULL AND invitation_id IS NULL END`

const PURPOSES_BEFORE = `'sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'invitation', 'security_notice'`

const ENQUEUE = (apiKey: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.enqueue_message(p jsonb) RETURNS void
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      job_id uuid;
    BEGIN
      INSERT INTO outbox.security_outbox_messages
        (id, job_id, purpose, challenge_id, invitation_id, channel, destination, locale, destination_hmac, expires_at${apiKey ? ', api_key_id' : ''})
      VALUES ((p->>'message_id')::uuid, (p->>'job_id')::uuid, p->>'purpose', (p->>'challenge_id')::uuid, (p->>'invitation_id')::uuid,
              p->>'channel', p->>'destination', p->>'locale', decode(p->>'destination_hmac', 'hex'), (p->>'expires_at')::timestamptz${apiKey ? `, (p->>'api_key_id')::uuid` : ''});
      INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ((p->>'message_id')::uuid, p->>'envelope');
      job_id := outbox.insert_delivery_job(p->>'job_json');
      IF job_id IS DISTINCT FROM (p->>'job_id')::uuid THEN
        RAISE EXCEPTION 'the job inserted is not the message''s' USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE platform.api_keys (
      id uuid PRIMARY KEY,
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
      secret_hash bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
      purposes text[] NOT NULL CHECK (cardinality(purposes) > 0 AND purposes <@ ARRAY['sign_up', 'add_sign_in_method',
        'password_recovery', 'step_up', 'verification_code', 'magic_link']),
      channels text[] NOT NULL CHECK (cardinality(channels) > 0 AND channels <@ ARRAY['email', 'whatsapp', 'sms']),
      requests_per_minute integer NOT NULL CHECK (requests_per_minute BETWEEN 1 AND 100000),
      per_destination_per_hour integer NOT NULL CHECK (per_destination_per_hour BETWEEN 1 AND 1000),
      per_destination_per_day integer NOT NULL CHECK (per_destination_per_day BETWEEN 1 AND 10000),
      created_by uuid NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz,
      last_used_at timestamptz,
      replaces uuid REFERENCES platform.api_keys (id)
    );
    GRANT SELECT (id, secret_hash, purposes, channels, requests_per_minute, per_destination_per_hour, per_destination_per_day, revoked_at,
                   last_used_at)
      ON platform.api_keys TO sealpost_api;
    GRANT UPDATE (last_used_at) ON platform.api_keys TO sealpost_api;

    -- A key's requests per minute: one counter row per key and minute, so a busy key costs one
    -- upsert a request (a sliding window of hits would count every hit of the last minute under
    -- one lock). A fixed window lets a key send up to twice its rate across a minute's boundary.
    CREATE TABLE platform.api_key_minutes (
      api_key_id uuid NOT NULL REFERENCES platform.api_keys (id),
      minute timestamptz NOT NULL,
      requests integer NOT NULL,
      PRIMARY KEY (api_key_id, minute)
    );
    GRANT SELECT, INSERT, UPDATE, DELETE ON platform.api_key_minutes TO sealpost_api;
    CREATE FUNCTION platform.spend_api_key_request(p_key uuid, p_now timestamptz, p_max integer) RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      this_minute timestamptz := date_trunc('minute', p_now);
      spent integer;
      fresh boolean;
    BEGIN
      INSERT INTO platform.api_key_minutes AS m (api_key_id, minute, requests) VALUES (p_key, this_minute, 1)
        ON CONFLICT (api_key_id, minute) DO UPDATE SET requests = m.requests + 1 WHERE m.requests < p_max
        RETURNING requests, (xmax = 0) INTO spent, fresh;
      IF spent IS NULL THEN RETURN extract(epoch FROM this_minute + interval '1 minute' - p_now); END IF;
      -- A key's first request of a minute drops its earlier minutes: the table holds about one row a key.
      IF fresh THEN DELETE FROM platform.api_key_minutes WHERE api_key_id = p_key AND minute < this_minute; END IF;
      RETURN NULL;
    END $$;
    REVOKE ALL ON FUNCTION platform.spend_api_key_request(uuid, timestamptz, integer) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.spend_api_key_request(uuid, timestamptz, integer) TO sealpost_api;

    ALTER TABLE outbox.security_outbox_messages
      DROP CONSTRAINT security_outbox_messages_purpose_check,
      ADD CONSTRAINT security_outbox_messages_purpose_check
        CHECK (purpose IN (${PURPOSES_BEFORE}, 'verification_code', 'magic_link')),
      ADD COLUMN api_key_id uuid REFERENCES platform.api_keys (id),
      DROP CONSTRAINT messages_subject_chk,
      ADD CONSTRAINT messages_subject_chk CHECK (
        CASE
          WHEN api_key_id IS NOT NULL THEN challenge_id IS NULL AND invitation_id IS NULL
            AND purpose NOT IN ('invitation', 'security_notice')
          WHEN purpose IN ('verification_code', 'magic_link') THEN false
          ELSE ${SUBJECT_BEFORE} END);
    CREATE INDEX security_outbox_messages_api_key_idx ON outbox.security_outbox_messages (api_key_id) WHERE api_key_id IS NOT NULL;
    ${ENQUEUE(true)}

    CREATE FUNCTION platform.create_api_key(p_session_hash bytea, p_now timestamptz, p jsonb) RETURNS void
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
      old platform.api_keys;
    BEGIN
      IF p->>'replaces' IS NOT NULL THEN
        UPDATE platform.api_keys SET revoked_at = p_now WHERE id = (p->>'replaces')::uuid AND revoked_at IS NULL RETURNING * INTO old;
        IF old.id IS NULL THEN RAISE EXCEPTION 'no live api key to rotate' USING ERRCODE = 'no_data_found'; END IF;
      END IF;
      INSERT INTO platform.api_keys (id, name, secret_hash, purposes, channels, requests_per_minute, per_destination_per_hour,
                                     per_destination_per_day, created_by, created_at, replaces)
      VALUES ((p->>'id')::uuid, coalesce(old.name, p->>'name'), decode(p->>'secret_hash', 'hex'),
              coalesce(old.purposes, ARRAY(SELECT jsonb_array_elements_text(p->'purposes'))),
              coalesce(old.channels, ARRAY(SELECT jsonb_array_elements_text(p->'channels'))),
              coalesce(old.requests_per_minute, (p->>'requests_per_minute')::integer),
              coalesce(old.per_destination_per_hour, (p->>'per_destination_per_hour')::integer),
              coalesce(old.per_destination_per_day, (p->>'per_destination_per_day')::integer),
              staff, p_now, old.id);
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, CASE WHEN old.id IS NULL THEN 'api_key.created' ELSE 'api_key.rotated' END,
                p->>'id', CASE WHEN old.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('replaces', old.id) END);
    END $$;

    CREATE FUNCTION platform.revoke_api_key(p_session_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_hash, p_now);
    BEGIN
      UPDATE platform.api_keys SET revoked_at = p_now WHERE id = p_id AND revoked_at IS NULL;
      IF NOT FOUND THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'api_key.revoked', p_id::text, '{}'::jsonb);
      RETURN true;
    END $$;

    CREATE FUNCTION platform.api_key_list(p_session_hash bytea, p_now timestamptz)
      RETURNS TABLE (id uuid, name text, purposes text[], channels text[], requests_per_minute integer, per_destination_per_hour integer,
                     per_destination_per_day integer, created_by uuid, created_at timestamptz, revoked_at timestamptz,
                     last_used_at timestamptz, replaces uuid)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_hash, p_now);
      RETURN QUERY SELECT k.id, k.name, k.purposes, k.channels, k.requests_per_minute, k.per_destination_per_hour,
                          k.per_destination_per_day, k.created_by, k.created_at, k.revoked_at, k.last_used_at, k.replaces
        FROM platform.api_keys k ORDER BY k.created_at DESC, k.id DESC LIMIT 500;
    END $$;

    CREATE FUNCTION outbox.courier_message(p_api_key_id uuid, p_message_id uuid) RETURNS jsonb
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT jsonb_build_object(
               'messageId', m.id, 'purpose', m.purpose, 'channel', m.channel,
               'maskedDestination', outbox.mask_destination(m.destination), 'state', m.state,
               'attemptCount', m.attempt_count, 'createdAt', m.created_at, 'expiresAt', m.expires_at,
               'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at,
               'deadLetterReason', (SELECT d.reason FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id),
               'attempts', coalesce((SELECT jsonb_agg(jsonb_build_object('attemptNo', a.attempt_no, 'outcome', a.outcome,
                                                                         'failureClass', a.failure_class, 'attemptedAt', a.attempted_at)
                                                      ORDER BY a.attempt_no)
                                       FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb))
        FROM outbox.security_outbox_messages m
       WHERE m.id = p_message_id AND m.api_key_id = p_api_key_id
    $$;

    REVOKE ALL ON FUNCTION platform.create_api_key(bytea, timestamptz, jsonb), platform.revoke_api_key(bytea, timestamptz, uuid),
      platform.api_key_list(bytea, timestamptz), outbox.courier_message(uuid, uuid) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.create_api_key(bytea, timestamptz, jsonb), platform.revoke_api_key(bytea, timestamptz, uuid),
      platform.api_key_list(bytea, timestamptz), outbox.courier_message(uuid, uuid) TO sealpost_api;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.courier_message(uuid, uuid);
    DROP FUNCTION platform.api_key_list(bytea, timestamptz);
    DROP FUNCTION platform.revoke_api_key(bytea, timestamptz, uuid);
    DROP FUNCTION platform.create_api_key(bytea, timestamptz, jsonb);
    ${ENQUEUE(false)}
    CREATE TEMP TABLE courier ON COMMIT DROP AS SELECT id FROM outbox.security_outbox_messages WHERE api_key_id IS NOT NULL;
    DELETE FROM outbox.security_outbox_delivery_events WHERE message_id IN (SELECT id FROM courier);
    DELETE FROM outbox.security_outbox_attempts WHERE message_id IN (SELECT id FROM courier);
    DELETE FROM outbox.security_outbox_dead_letters WHERE message_id IN (SELECT id FROM courier);
    DELETE FROM outbox.security_outbox_ciphertexts WHERE message_id IN (SELECT id FROM courier);
    DELETE FROM outbox.security_outbox_messages WHERE id IN (SELECT id FROM courier);
    ALTER TABLE outbox.security_outbox_messages
      DROP CONSTRAINT messages_subject_chk,
      DROP COLUMN api_key_id,
      ADD CONSTRAINT messages_subject_chk CHECK (${SUBJECT_BEFORE}),
      DROP CONSTRAINT security_outbox_messages_purpose_check,
      ADD CONSTRAINT security_outbox_messages_purpose_check CHECK (purpose IN (${PURPOSES_BEFORE}));
    DROP FUNCTION platform.spend_api_key_request(uuid, timestamptz, integer);
    DROP TABLE platform.api_key_minutes;
    DROP TABLE platform.api_keys;
  `)
}
