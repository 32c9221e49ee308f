import type { Knex } from 'knex'

/**
 * The SMS cap per number prefix (SMS_PREFIX_HOURLY_CAP): its counters are send_windows rows whose
 * `scope` is `p` and the first seven digits of the E.164 number (`p4477009`), beside the channel's
 * ('') and the calling codes' (up to three digits). The CHECK is widened, never narrowed: the
 * previous release keeps writing what it wrote, and never reads a scope it does not ask for.
 * Down drops the prefix rows first (they are this hour's and the last hour's counts, nothing more).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.send_windows DROP CONSTRAINT send_windows_scope_check;
    ALTER TABLE outbox.send_windows ADD CONSTRAINT send_windows_scope_check CHECK (scope ~ '^([0-9]{0,3}|p[0-9]{7})$');
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DELETE FROM outbox.send_windows WHERE scope LIKE 'p%';
    ALTER TABLE outbox.send_windows DROP CONSTRAINT send_windows_scope_check;
    ALTER TABLE outbox.send_windows ADD CONSTRAINT send_windows_scope_check CHECK (scope ~ '^[0-9]{0,3}$');
  `)
}
