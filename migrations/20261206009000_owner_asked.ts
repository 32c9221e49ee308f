import type { Knex } from 'knex'

/**
 * Who asked for a message, as the web knew it when it wrote it (docs/security.md "Caps from the
 * owner's side"), instead of whether its destination is somebody's verified identifier, which a
 * stranger can aim at (an invitation, a sign-up for an existing account) and which differs with
 * the account's existence.
 *
 * - `security_outbox_messages.asked`: `owner` for what only the person behind an account asks for
 *   itself (a recovery to the identity's verified identifier, a step-up, a security notice of our
 *   own flows), `stranger` for what anyone can aim at any identifier (a sign-up, whatever it finds;
 *   a new sign-in method; an invitation). NULL: written by the previous release's web, counted as a
 *   stranger's as that release's worker counted everything. The CHECK keeps `owner` to those three
 *   purposes and off courier messages; it is NOT VALID because every existing row holds NULL, which
 *   it allows: validating would only scan the table under the migration's lock. The worker may not
 *   update the column (its UPDATE grant names columns), and a trigger refuses a change for every role.
 * - `outbox.enqueue_message` writes it from the message's `asked`, or copies it from the message
 *   named by `asked_like` (a phone fallback or a staff reissue sends the same challenge's code again
 *   for the same asker). Same signature: the previous release's web calls it unchanged. It is
 *   20261206006000's function (which writes `carriers`) with `asked` beside it, and down puts that
 *   one back.
 * - `outbox.message_askers` reads the column: `courier` for an API key's or a hook's message, `owner`
 *   for an owner's, else `stranger`.
 */
const ENQUEUE = (asked: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.enqueue_message(p jsonb) RETURNS void
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      job_id uuid;
    BEGIN
      INSERT INTO outbox.security_outbox_messages
        (id, job_id, purpose, challenge_id, invitation_id, channel, destination, locale, destination_hmac, expires_at, api_key_id, carriers${asked ? ', asked' : ''})
      VALUES ((p->>'message_id')::uuid, (p->>'job_id')::uuid, p->>'purpose', (p->>'challenge_id')::uuid, (p->>'invitation_id')::uuid,
              p->>'channel', p->>'destination', p->>'locale', decode(p->>'destination_hmac', 'hex'), (p->>'expires_at')::timestamptz,
              (p->>'api_key_id')::uuid, (SELECT array_agg(c ORDER BY n) FROM jsonb_array_elements_text(p->'carriers') WITH ORDINALITY AS e (c, n))
              ${asked ? `, coalesce(p->>'asked', outbox.asked_of((p->>'asked_like')::uuid))` : ''});
      INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ((p->>'message_id')::uuid, p->>'envelope');
      job_id := outbox.insert_delivery_job(p->>'job_json');
      IF job_id IS DISTINCT FROM (p->>'job_id')::uuid THEN
        RAISE EXCEPTION 'the job inserted is not the message''s' USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END $$;`

const ASKERS = (rule: string) => `
    CREATE OR REPLACE FUNCTION outbox.message_askers(p_ids uuid[]) RETURNS TABLE (message_id uuid, asked text)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT m.id, ${rule}
        FROM outbox.security_outbox_messages m
       WHERE m.id = ANY (p_ids)
    $$;`

const ASKED_RULE = `CASE WHEN m.api_key_id IS NOT NULL THEN 'courier' WHEN m.asked = 'owner' THEN 'owner' ELSE 'stranger' END`

const DESTINATION_RULE = `CASE WHEN m.api_key_id IS NOT NULL THEN 'courier'
                  WHEN EXISTS (SELECT FROM identity.login_identifiers li
                                WHERE li.kind = CASE m.channel WHEN 'email' THEN 'email' ELSE 'phone' END
                                  AND li.value = m.destination AND li.verified_at IS NOT NULL) THEN 'owner'
                  ELSE 'stranger' END`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_messages
      ADD COLUMN asked text,
      ADD CONSTRAINT messages_asked_chk CHECK (
        asked IS NULL OR asked = 'stranger'
        OR (asked = 'owner' AND api_key_id IS NULL AND purpose IN ('password_recovery', 'step_up', 'security_notice'))) NOT VALID;
    CREATE TRIGGER messages_asked_immutable BEFORE UPDATE ON outbox.security_outbox_messages
      FOR EACH ROW WHEN (OLD.asked IS DISTINCT FROM NEW.asked)
      EXECUTE FUNCTION outbox.refuse_message_identity_change();

    -- The asker of one message, for the web's enqueue of the same challenge's next code: the class only.
    CREATE FUNCTION outbox.asked_of(p_message_id uuid) RETURNS text
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT asked FROM outbox.security_outbox_messages WHERE id = p_message_id
    $$;
    REVOKE ALL ON FUNCTION outbox.asked_of(uuid) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.asked_of(uuid) TO sealpost_api;
    ${ENQUEUE(true)}
    ${ASKERS(ASKED_RULE)}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${ASKERS(DESTINATION_RULE)}
    ${ENQUEUE(false)}
    DROP FUNCTION outbox.asked_of(uuid);
    DROP TRIGGER messages_asked_immutable ON outbox.security_outbox_messages;
    ALTER TABLE outbox.security_outbox_messages DROP CONSTRAINT messages_asked_chk, DROP COLUMN asked;
  `)
}
