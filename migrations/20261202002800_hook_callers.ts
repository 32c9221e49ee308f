import type { Knex } from 'knex'

/**
 * The hook adapters' courier callers (docs/hooks.md): one `platform.api_keys` row each for the
 * Supabase Auth hooks and the Ory Kratos courier, so their messages are attributed to a caller
 * as an API key's are (`security_outbox_messages.api_key_id`). They authenticate with their own
 * secrets, never as API keys: the stored hash is 32 zero bytes, which no secret hashes to.
 * Scopes and limits here are what the console shows; the adapters' own (src/hooks) decide.
 */
const CALLERS = `
  ('0193c0de-5ab0-7000-8000-000000000001', 'Supabase Auth hooks (SUPABASE_HOOK_SECRET)',
   ARRAY['magic_link', 'verification_code', 'step_up']),
  ('0193c0de-5ab0-7000-8000-000000000002', 'Ory Kratos courier (KRATOS_COURIER_API_KEY)',
   ARRAY['password_recovery', 'verification_code', 'sign_up', 'magic_link'])`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    INSERT INTO platform.api_keys (id, name, secret_hash, purposes, channels, requests_per_minute,
                                   per_destination_per_hour, per_destination_per_day, created_by, created_at)
    SELECT c.id::uuid, c.name, decode(repeat('00', 32), 'hex'), c.purposes, ARRAY['email', 'sms', 'whatsapp'],
           6000, 20, 100, '00000000-0000-0000-0000-000000000000'::uuid, '2026-12-02T00:00:00Z'::timestamptz
      FROM (VALUES ${CALLERS}) AS c (id, name, purposes)`)
}

export async function down(knex: Knex): Promise<void> {
  // Their messages keep pointing at them until retention deletes the messages: those rows stay.
  await knex.raw(`
    DELETE FROM platform.api_keys k
     WHERE k.id IN ('0193c0de-5ab0-7000-8000-000000000001', '0193c0de-5ab0-7000-8000-000000000002')
       AND NOT EXISTS (SELECT 1 FROM outbox.security_outbox_messages m WHERE m.api_key_id = k.id)`)
}
