import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * The identity side of the four security flows: sessions, step-up elevations, a candidate
 * password on sign-up challenges, identifiers that several identities may claim until one verifies,
 * database-enforced rate-limit hits, and the SECURITY DEFINER functions through which the web
 * changes outbox state it may not touch directly (DESIGN §7).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE identity.login_identifiers DROP CONSTRAINT login_identifiers_kind_value_key;
    CREATE UNIQUE INDEX login_identifiers_verified_uq ON identity.login_identifiers (kind, value) WHERE verified_at IS NOT NULL;
    CREATE UNIQUE INDEX login_identifiers_claim_uq ON identity.login_identifiers (identity_id, kind, value);
    CREATE INDEX login_identifiers_value_idx ON identity.login_identifiers (kind, value);

    ALTER TABLE identity.challenges ADD COLUMN candidate_password_hash text,
      ADD CONSTRAINT challenges_candidate_password_chk CHECK (candidate_password_hash IS NULL OR purpose = 'sign_up');

    CREATE TABLE identity.sessions (
      id uuid PRIMARY KEY,
      identity_id uuid NOT NULL REFERENCES identity.identities (id),
      token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      revoked_at timestamptz
    );
    CREATE INDEX sessions_identity_idx ON identity.sessions (identity_id) WHERE revoked_at IS NULL;

    CREATE TABLE identity.elevations (
      id uuid PRIMARY KEY,
      identity_id uuid NOT NULL REFERENCES identity.identities (id),
      session_id uuid NOT NULL REFERENCES identity.sessions (id),
      token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    );

    CREATE SCHEMA platform;
    -- One row per counted event; keys are HMACs of a destination or client address, never the value.
    CREATE TABLE platform.rate_limit_hits (
      bucket_key bytea NOT NULL,
      hit_at timestamptz NOT NULL
    );
    CREATE INDEX rate_limit_hits_bucket_idx ON platform.rate_limit_hits (bucket_key, hit_at);
    CREATE INDEX rate_limit_hits_age_idx ON platform.rate_limit_hits (hit_at);

    -- Resend (OB7): every unsent message of the challenge is dead-lettered, its ciphertext erased.
    -- A worker mid-send then finds its lease gone and records nothing; a queued job settles as a no-op.
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
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_open_messages(uuid, text) TO ${API_ROLE};

    GRANT USAGE ON SCHEMA platform TO ${API_ROLE};
    GRANT SELECT, INSERT, DELETE ON platform.rate_limit_hits TO ${API_ROLE};
    GRANT SELECT, INSERT, UPDATE ON identity.sessions, identity.elevations TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.dead_letter_open_messages(uuid, text);
    DROP SCHEMA platform CASCADE;
    DROP TABLE identity.elevations, identity.sessions;
    ALTER TABLE identity.challenges DROP COLUMN candidate_password_hash;
    DROP INDEX identity.login_identifiers_verified_uq, identity.login_identifiers_claim_uq, identity.login_identifiers_value_idx;
    ALTER TABLE identity.login_identifiers ADD CONSTRAINT login_identifiers_kind_value_key UNIQUE (kind, value);
  `)
}
