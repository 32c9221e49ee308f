import type { Knex } from 'knex'

/**
 * The database's delivery invariants, checked as before, at a cost that no longer depends on when
 * the tables were last analyzed:
 *
 * - The check that a final message keeps no ciphertext ran at COMMIT for every change of a
 *   message's state, the claim's pending → leased too, which can never break it: a plpgsql call and
 *   a join per claimed message for nothing. Now the row event is queued only when the new state is
 *   final (a WHEN condition is evaluated when the row changes; the check itself still runs at
 *   COMMIT). A final state never changes again (messages_final_state_immutable), so every way to a
 *   final message with a ciphertext still passes one queued check: the change to final, or the
 *   ciphertext's insert (ciphertexts_only_on_open_message, unchanged).
 * - The trigger functions look rows up by key, and a trigger keeps its plans for its connection's
 *   life. A table last analyzed empty (a fresh deployment, the retention sweep after a quiet night)
 *   makes a sequential scan free to the planner: every later check then scanned every attempt
 *   there was, at a cost growing with the table, for every delivered
 *   message until autovacuum analyzed the table again. The functions now plan without sequential
 *   scans (`enable_seqscan = off` for their own statements only), so they take the key's index
 *   whatever the statistics say.
 */
const CHECK_FUNCTIONS = [
  'outbox.check_attempt_count()',
  'outbox.sequence_attempt()',
  'outbox.refuse_ciphertext_on_final_message()',
] as const

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER messages_final_without_ciphertext ON outbox.security_outbox_messages;
    CREATE CONSTRAINT TRIGGER messages_final_without_ciphertext
      AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN (NEW.state IN ('published', 'dead_lettered'))
      EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
    ${CHECK_FUNCTIONS.map((fn) => `ALTER FUNCTION ${fn} SET enable_seqscan = off;`).join('\n    ')}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${CHECK_FUNCTIONS.map((fn) => `ALTER FUNCTION ${fn} RESET enable_seqscan;`).join('\n    ')}
    DROP TRIGGER messages_final_without_ciphertext ON outbox.security_outbox_messages;
    CREATE CONSTRAINT TRIGGER messages_final_without_ciphertext
      AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox.refuse_ciphertext_on_final_message();
  `)
}
