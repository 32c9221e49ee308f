import type { Knex } from 'knex'

/**
 * A new purpose, `security_notice`: a message that tells an identity's other verified identifiers
 * that a sign-in method was added or the password changed. It carries no secret to act on, belongs
 * to no challenge or invitation, and is otherwise an outbox message like any other (sealed body,
 * same worker, retries, dead letters and retention).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_messages
      DROP CONSTRAINT security_outbox_messages_purpose_check,
      ADD CONSTRAINT security_outbox_messages_purpose_check
        CHECK (purpose IN ('sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'invitation', 'security_notice')),
      DROP CONSTRAINT messages_subject_chk,
      ADD CONSTRAINT messages_subject_chk CHECK (
        CASE purpose
          WHEN 'invitation' THEN invitation_id IS NOT NULL AND challenge_id IS NULL
          WHEN 'security_notice' THEN invitation_id IS NULL AND challenge_id IS NULL
          ELSE challenge_id IS NOT NULL AND invitation_id IS NULL END);
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TEMP TABLE notices ON COMMIT DROP AS SELECT id FROM outbox.security_outbox_messages WHERE purpose = 'security_notice';
    DELETE FROM outbox.security_outbox_attempts WHERE message_id IN (SELECT id FROM notices);
    DELETE FROM outbox.security_outbox_dead_letters WHERE message_id IN (SELECT id FROM notices);
    DELETE FROM outbox.security_outbox_ciphertexts WHERE message_id IN (SELECT id FROM notices);
    DELETE FROM outbox.security_outbox_messages WHERE id IN (SELECT id FROM notices);
    ALTER TABLE outbox.security_outbox_messages
      DROP CONSTRAINT security_outbox_messages_purpose_check,
      ADD CONSTRAINT security_outbox_messages_purpose_check
        CHECK (purpose IN ('sign_up', 'add_sign_in_method', 'password_recovery', 'step_up', 'invitation')),
      DROP CONSTRAINT messages_subject_chk,
      ADD CONSTRAINT messages_subject_chk CHECK (
        CASE WHEN purpose = 'invitation'
          THEN invitation_id IS NOT NULL AND challenge_id IS NULL
          ELSE challenge_id IS NOT NULL AND invitation_id IS NULL END);
  `)
}
