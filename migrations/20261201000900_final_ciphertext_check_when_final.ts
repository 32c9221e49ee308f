import type { Knex } from 'knex'

/**
 * The check that a final message keeps no ciphertext ran at COMMIT for every change of a message's
 * state, the claim's pending → leased too, which can never break it: a plpgsql call and a join per
 * claimed message for nothing (bench/README.md "The allocation round"). Now the row event is queued
 * only when the new state is final (a WHEN condition is evaluated when the row changes, the check
 * itself still at COMMIT). A final state never changes again (messages_final_state_immutable), so
 * every way to a final message with a ciphertext still passes through one of the queued checks: the
 * state change to final, or the ciphertext's insert (ciphertexts_only_on_open_message, unchanged).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER messages_final_without_ciphertext ON outbox.security_outbox_messages;
    CREATE CONSTRAINT TRIGGER messages_final_without_ciphertext
      AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN (NEW.state IN ('published', 'dead_lettered'))
      EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER messages_final_without_ciphertext ON outbox.security_outbox_messages;
    CREATE CONSTRAINT TRIGGER messages_final_without_ciphertext
      AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
  `)
}
