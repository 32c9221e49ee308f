import type { Knex } from 'knex'

/**
 * Security notices from the identity systems' hooks (docs/hooks.md): Supabase Auth's
 * `*_notification` emails and Kratos' address-changed, key-added and unknown-address messages are
 * delivered as `security_notice` messages attributed to the hook's caller (`api_key_id`). Until now
 * a message with a caller could be no security notice; the subject CHECK now allows one (still no
 * challenge, no invitation). Wider only: every row the previous release writes still passes, and
 * it never writes such a message.
 */
const SUBJECT_OF_OUR_OWN = `CASE purpose
          WHEN 'invitation' THEN invitation_id IS NOT NULL AND challenge_id IS NULL
          WHEN 'security_notice' THEN invitation_id IS NULL AND challenge_id IS NULL
          ELSE challenge_id IS NOT NULL AND invitation_id IS NULL END`

const subjectCheck = (callerPurposesExcluded: string) => `
    ALTER TABLE outbox.security_outbox_messages
      DROP CONSTRAINT messages_subject_chk,
      ADD CONSTRAINT messages_subject_chk CHECK (
        CASE
          WHEN api_key_id IS NOT NULL THEN challenge_id IS NULL AND invitation_id IS NULL
            AND purpose NOT IN (${callerPurposesExcluded})
          WHEN purpose IN ('verification_code', 'magic_link') THEN false
          ELSE ${SUBJECT_OF_OUR_OWN} END);`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(subjectCheck(`'invitation'`))
}

export async function down(knex: Knex): Promise<void> {
  // The notices hooks handed over cannot stay under the narrower rule: they go, with what hangs off them (cascades).
  await knex.raw(`
    DELETE FROM outbox.security_outbox_messages WHERE api_key_id IS NOT NULL AND purpose = 'security_notice';
    ${subjectCheck(`'invitation', 'security_notice'`)}
  `)
}
