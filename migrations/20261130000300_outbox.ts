import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE SCHEMA outbox;

    -- No organization column: the security outbox never knows tenants (DESIGN §3).
    CREATE TABLE outbox.security_outbox_messages (
      id uuid PRIMARY KEY,
      purpose text NOT NULL CHECK (purpose IN ('sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'invitation')),
      challenge_id uuid REFERENCES identity.challenges (id),
      invitation_id uuid,
      channel text NOT NULL CHECK (channel IN ('email', 'whatsapp')),
      destination text NOT NULL,
      locale text NOT NULL DEFAULT 'en',
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'leased', 'published', 'dead_lettered')),
      attempt_count integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
      available_at timestamptz NOT NULL DEFAULT now(),
      lease_job_id uuid,
      lease_retry_count integer,
      leased_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      published_at timestamptz,
      dead_lettered_at timestamptz,
      expires_at timestamptz NOT NULL,
      CONSTRAINT messages_subject_chk CHECK (
        CASE WHEN purpose = 'invitation'
          THEN invitation_id IS NOT NULL AND challenge_id IS NULL
          ELSE challenge_id IS NOT NULL AND invitation_id IS NULL END),
      CONSTRAINT messages_leased_has_lease_chk CHECK (
        state <> 'leased' OR (lease_job_id IS NOT NULL AND lease_retry_count IS NOT NULL AND leased_at IS NOT NULL)),
      CONSTRAINT messages_published_at_chk CHECK ((state = 'published') = (published_at IS NOT NULL)),
      CONSTRAINT messages_dead_lettered_at_chk CHECK ((state = 'dead_lettered') = (dead_lettered_at IS NOT NULL))
    );
    CREATE INDEX messages_open_by_challenge_idx ON outbox.security_outbox_messages (challenge_id)
      WHERE state IN ('pending', 'leased');
    CREATE INDEX messages_open_by_expiry_idx ON outbox.security_outbox_messages (expires_at)
      WHERE state IN ('pending', 'leased');
    CREATE INDEX messages_state_available_idx ON outbox.security_outbox_messages (state, available_at);
    CREATE INDEX messages_published_at_idx ON outbox.security_outbox_messages (published_at) WHERE state = 'published';
    CREATE INDEX messages_dead_lettered_at_idx ON outbox.security_outbox_messages (dead_lettered_at) WHERE state = 'dead_lettered';

    -- 1:1 with a message, the sealed envelope only, so deleting it never touches the audit trail.
    CREATE TABLE outbox.security_outbox_ciphertexts (
      message_id uuid PRIMARY KEY REFERENCES outbox.security_outbox_messages (id) ON DELETE CASCADE,
      envelope text NOT NULL CHECK (envelope LIKE 'v1.%')
    );

    CREATE TABLE outbox.security_outbox_attempts (
      message_id uuid NOT NULL REFERENCES outbox.security_outbox_messages (id) ON DELETE CASCADE,
      attempt_no integer NOT NULL CHECK (attempt_no >= 1),
      outcome text NOT NULL CHECK (outcome IN ('published', 'retryable_error', 'failed')),
      failure_class text CHECK (failure_class IN ('REJECTED', 'THROTTLED', 'UNAVAILABLE', 'INDETERMINATE', 'unexpected_worker_error', 'invitation_link_unconfigured')),
      provider_message_id text,
      retry_after_at timestamptz,
      duration_ms integer NOT NULL CHECK (duration_ms >= 0),
      attempted_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (message_id, attempt_no),
      CONSTRAINT attempts_failure_class_chk CHECK ((outcome = 'published') = (failure_class IS NULL))
    );

    CREATE TABLE outbox.security_outbox_dead_letters (
      message_id uuid PRIMARY KEY REFERENCES outbox.security_outbox_messages (id) ON DELETE CASCADE,
      reason text NOT NULL CHECK (reason IN ('provider_rejected', 'retries_exhausted', 'challenge_expired', 'challenge_consumed', 'decryption_failed', 'superseded_by_resend', 'worker_crash_loop', 'invitation_revoked', 'invitation_accepted', 'invitation_expired')),
      last_failure_class text CHECK (last_failure_class IN ('REJECTED', 'THROTTLED', 'UNAVAILABLE', 'INDETERMINATE', 'unexpected_worker_error', 'invitation_link_unconfigured')),
      dead_lettered_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX dead_letters_page_idx ON outbox.security_outbox_dead_letters (dead_lettered_at DESC, message_id DESC);

    -- Invariant: a final state never changes.
    CREATE FUNCTION outbox.refuse_final_state_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF OLD.state IN ('published', 'dead_lettered') THEN
        RAISE EXCEPTION 'security outbox message % is final (%) and cannot change', OLD.id, OLD.state
          USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER messages_final_state_immutable BEFORE UPDATE ON outbox.security_outbox_messages
      FOR EACH ROW EXECUTE FUNCTION outbox.refuse_final_state_change();

    -- Invariant: attempts are numbered 1, 2, 3… per message, only under a lease, and the message's
    -- attempt_count follows them (it is never written by hand).
    CREATE FUNCTION outbox.sequence_attempt() RETURNS trigger LANGUAGE plpgsql
      SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      current_state text;
      current_count integer;
    BEGIN
      SELECT state, attempt_count INTO current_state, current_count
        FROM outbox.security_outbox_messages WHERE id = NEW.message_id FOR UPDATE;
      IF current_state IS DISTINCT FROM 'leased' THEN
        RAISE EXCEPTION 'an attempt needs a leased message' USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      IF NEW.attempt_no <> current_count + 1 THEN
        RAISE EXCEPTION 'attempt % is out of sequence (expected %)', NEW.attempt_no, current_count + 1
          USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      UPDATE outbox.security_outbox_messages SET attempt_count = NEW.attempt_no WHERE id = NEW.message_id;
      RETURN NEW;
    END $$;
    CREATE TRIGGER attempts_sequential BEFORE INSERT ON outbox.security_outbox_attempts
      FOR EACH ROW EXECUTE FUNCTION outbox.sequence_attempt();
    CREATE FUNCTION outbox.refuse_attempt_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'attempts are append-only' USING ERRCODE = 'integrity_constraint_violation';
    END $$;
    CREATE TRIGGER attempts_append_only BEFORE UPDATE ON outbox.security_outbox_attempts
      FOR EACH ROW EXECUTE FUNCTION outbox.refuse_attempt_change();

    -- Invariant: a published or dead-lettered message has no ciphertext, checked at COMMIT so the
    -- state change and the delete may come in either order inside one transaction.
    -- SECURITY DEFINER: the web inserts ciphertexts but may never read them back.
    CREATE FUNCTION outbox.refuse_ciphertext_on_final_message() RETURNS trigger LANGUAGE plpgsql
      SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      subject uuid;
    BEGIN
      IF TG_TABLE_NAME = 'security_outbox_messages' THEN subject := NEW.id; ELSE subject := NEW.message_id; END IF;
      IF EXISTS (
        SELECT FROM outbox.security_outbox_messages m
          JOIN outbox.security_outbox_ciphertexts c ON c.message_id = m.id
         WHERE m.id = subject AND m.state IN ('published', 'dead_lettered')
      ) THEN
        RAISE EXCEPTION 'final security outbox message % still has a ciphertext', subject
          USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER messages_final_without_ciphertext
      AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
    CREATE CONSTRAINT TRIGGER ciphertexts_only_on_open_message
      AFTER INSERT OR UPDATE ON outbox.security_outbox_ciphertexts
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP SCHEMA outbox CASCADE')
}
