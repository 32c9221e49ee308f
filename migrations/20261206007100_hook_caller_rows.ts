import type { Knex } from 'knex'

/**
 * A hook caller's scopes and limits have one home, the code (`HOOK_CALLERS` in
 * src/hooks/hook-delivery.ts, under HOOK_DESTINATION_HOURLY_BUDGET): docs/hooks.md "Budgets".
 *
 * 20261202002800_hook_callers gave the two rows the hook adapters are attributed to scopes and
 * limits of their own (6 000 requests a minute, 20 codes an address an hour, 100 a day) that
 * nothing reads: no request authenticates as a hook's row (its hash has no preimage, and since
 * 20261206004100 a row of kind `hook` is refused as a key), the console lists only keys, and the
 * adapters send under the code's limits (600 an address an hour by default, a setting). A second
 * copy that disagrees with the first is read by the next person as the rule. The rows keep what
 * attribution needs (id, name, kind, who made them); their scope and limit columns are NULL, and a
 * CHECK keeps them NULL for a hook and set for a key.
 *
 * Rolling upgrades: every reader of these columns reads a key's row (kind `key`), whose columns
 * this leaves as they are; a web still running beside this release refuses a hook's row as a key
 * before it reads any of them. 0.2.0 has neither hooks nor keys. `down` writes the old values back.
 */
const COLUMNS = [
  'purposes',
  'channels',
  'requests_per_minute',
  'per_destination_per_hour',
  'per_destination_per_day',
  'sends_per_hour',
  'destinations_per_hour',
]

const HOOKS = `('0193c0de-5ab0-7000-8000-000000000001', '0193c0de-5ab0-7000-8000-000000000002')`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE platform.api_keys ${COLUMNS.map((column) => `ALTER COLUMN ${column} DROP NOT NULL`).join(', ')};
    UPDATE platform.api_keys SET ${COLUMNS.map((column) => `${column} = NULL`).join(', ')} WHERE kind = 'hook';
    ALTER TABLE platform.api_keys ADD CONSTRAINT api_keys_limits_are_keys_only CHECK (
      CASE kind WHEN 'hook' THEN ${COLUMNS.map((column) => `${column} IS NULL`).join(' AND ')}
                ELSE ${COLUMNS.map((column) => `${column} IS NOT NULL`).join(' AND ')} END);
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE platform.api_keys DROP CONSTRAINT api_keys_limits_are_keys_only;
    UPDATE platform.api_keys
       SET purposes = CASE id WHEN '0193c0de-5ab0-7000-8000-000000000001' THEN ARRAY['magic_link', 'verification_code', 'step_up']
                              ELSE ARRAY['password_recovery', 'verification_code', 'sign_up', 'magic_link'] END,
           channels = ARRAY['email', 'sms', 'whatsapp'], requests_per_minute = 6000, per_destination_per_hour = 20,
           per_destination_per_day = 100, sends_per_hour = 360000, destinations_per_hour = 360000
     WHERE id IN ${HOOKS};
    ALTER TABLE platform.api_keys ${COLUMNS.map((column) => `ALTER COLUMN ${column} SET NOT NULL`).join(', ')};
  `)
}
