import type { Knex } from 'knex'

/**
 * attempt_count used to be bumped by the attempts trigger with an UPDATE of the message: a third row
 * version per delivered message (docs/performance.md). Now the writer
 * sets it in the UPDATE that changes the message's state anyway, and the database still guarantees
 * the invariant: at COMMIT, a message's attempt_count equals its highest attempt number, checked
 * whenever an attempt is inserted or attempt_count changes. The insert-time checks stay: attempts
 * are numbered attempt_count + 1 and only under a lease.
 */
/** The attempts trigger: checks the sequence and the lease; before this migration it also bumped the count. */
function sequenceAttempt(options: { bumpCount: boolean }): string {
  return `CREATE OR REPLACE FUNCTION outbox.sequence_attempt() RETURNS trigger LANGUAGE plpgsql
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
      END IF;${
        options.bumpCount
          ? `
      UPDATE outbox.security_outbox_messages SET attempt_count = NEW.attempt_no WHERE id = NEW.message_id;`
          : ''
      }
      RETURN NEW;
    END $$;`
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ${sequenceAttempt({ bumpCount: false })}

    CREATE FUNCTION outbox.check_attempt_count() RETURNS trigger LANGUAGE plpgsql
      SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      subject uuid;
      counted integer;
      latest integer;
    BEGIN
      IF TG_TABLE_NAME = 'security_outbox_messages' THEN subject := NEW.id; ELSE subject := NEW.message_id; END IF;
      SELECT attempt_count INTO counted FROM outbox.security_outbox_messages WHERE id = subject;
      IF NOT FOUND THEN RETURN NULL; END IF;
      SELECT coalesce(max(attempt_no), 0) INTO latest FROM outbox.security_outbox_attempts WHERE message_id = subject;
      IF counted <> latest THEN
        RAISE EXCEPTION 'attempt_count % of security outbox message % does not match its attempts (%)', counted, subject, latest
          USING ERRCODE = 'integrity_constraint_violation';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER attempts_counted
      AFTER INSERT ON outbox.security_outbox_attempts
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.check_attempt_count();
    CREATE CONSTRAINT TRIGGER messages_attempt_count_matches
      AFTER UPDATE OF attempt_count ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.check_attempt_count();
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER messages_attempt_count_matches ON outbox.security_outbox_messages;
    DROP TRIGGER attempts_counted ON outbox.security_outbox_attempts;
    DROP FUNCTION outbox.check_attempt_count();
    ${sequenceAttempt({ bumpCount: true })}
  `)
}
