import type { Knex } from 'knex'

/**
 * Key rings (DESIGN §11): envelopes are now `v2.<keyId>.…`; `v1.…` envelopes sealed before this
 * release still open until their messages are final. Redefines the CHECK constraint
 * `security_outbox_ciphertexts_envelope_check` of 20261130000300_outbox.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_ciphertexts
      DROP CONSTRAINT security_outbox_ciphertexts_envelope_check,
      ADD CONSTRAINT security_outbox_ciphertexts_envelope_check CHECK (envelope LIKE 'v1.%' OR envelope LIKE 'v2.%')
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_ciphertexts
      DROP CONSTRAINT security_outbox_ciphertexts_envelope_check,
      ADD CONSTRAINT security_outbox_ciphertexts_envelope_check CHECK (envelope LIKE 'v1.%')
  `)
}
