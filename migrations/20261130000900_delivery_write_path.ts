import type { Knex } from 'knex'

/**
 * The delivery path updates each message three times (lease, attempt count, final state); every
 * update that is not HOT writes a new entry into every index whose key or predicate it touches
 * (bench/README.md has the figures). Two changes cut that write amplification:
 * - the (state, available_at) index, which no query used, becomes a partial index over pending
 *   messages only, the one the backlog's "oldest due" question needs;
 * - free space on each page (fillfactor 80) lets the attempt-count update stay HOT.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX outbox.messages_state_available_idx;
    CREATE INDEX messages_pending_available_idx ON outbox.security_outbox_messages (available_at) WHERE state = 'pending';
    ALTER TABLE outbox.security_outbox_messages SET (fillfactor = 80);
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_messages RESET (fillfactor);
    DROP INDEX outbox.messages_pending_available_idx;
    CREATE INDEX messages_state_available_idx ON outbox.security_outbox_messages (state, available_at);
  `)
}
