import type { Knex } from 'knex'

/**
 * A message's identity never changes once written (so a stolen worker login cannot redirect a code):
 * where it goes and what it is for (`destination`, `channel`, `purpose`, `challenge_id`,
 * `invitation_id`). Two locks, each alone enough against the worker's login:
 * - a trigger refuses the change for every role, the owner included (23000, like the other
 *   invariants of 20261130000300_outbox);
 * - the worker may UPDATE only the columns delivery moves (state, lease, attempts, schedule,
 *   timestamps): everything the worker, `outbox.dead_letter_messages` (SECURITY INVOKER) and the
 *   previous release's worker write; any other column is refused 42501 before a row is read.
 * The web has no UPDATE on messages at all; its SECURITY DEFINER functions only dead-letter.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION outbox.refuse_message_identity_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'security outbox message %: destination, channel, purpose, challenge and invitation never change', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
    END $$;
    CREATE TRIGGER messages_identity_immutable BEFORE UPDATE ON outbox.security_outbox_messages
      FOR EACH ROW
      WHEN (OLD.destination IS DISTINCT FROM NEW.destination OR OLD.channel IS DISTINCT FROM NEW.channel
         OR OLD.purpose IS DISTINCT FROM NEW.purpose OR OLD.challenge_id IS DISTINCT FROM NEW.challenge_id
         OR OLD.invitation_id IS DISTINCT FROM NEW.invitation_id)
      EXECUTE FUNCTION outbox.refuse_message_identity_change();

    -- Revoking the table-wide privilege revokes its column privileges too; then only these.
    REVOKE UPDATE ON outbox.security_outbox_messages FROM sealpost_worker;
    GRANT UPDATE (state, attempt_count, available_at, job_id, lease_job_id, lease_retry_count, leased_at, published_at, dead_lettered_at)
      ON outbox.security_outbox_messages TO sealpost_worker;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE UPDATE ON outbox.security_outbox_messages FROM sealpost_worker;
    GRANT UPDATE ON outbox.security_outbox_messages TO sealpost_worker;
    DROP TRIGGER messages_identity_immutable ON outbox.security_outbox_messages;
    DROP FUNCTION outbox.refuse_message_identity_change();
  `)
}
