import type { Knex } from 'knex'

/**
 * Phone routing in one function (docs/delivery.md "Phone channels") and a first boot that accepts.
 *
 * - `security_outbox_messages.carriers`: the phone channels the sender allowed the message to go
 *   out on, when it bound them (a courier key scoped to `whatsapp` stores `{whatsapp}`): the worker
 *   never carries it over another. NULL = any of the deployment's PHONE_CHANNELS, as every message
 *   of the previous release. Part of the message's identity: the immutability trigger covers it,
 *   and the worker has no UPDATE on it (its grant is column-level, 20261202000200), so a stolen
 *   worker login cannot widen a key's scope.
 * - `outbox.enqueue_message` writes `carriers` when given (same signature: the previous release's
 *   web calls it unchanged and writes NULL).
 * - `outbox.available_channels()` answers NULL while no worker has ever registered (a fresh
 *   database): the web then offers the channels its own settings name. The previous release's web
 *   reads NULL as no channels, as it read the empty array before (same signature and type).
 */
const ENQUEUE = (carriers: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.enqueue_message(p jsonb) RETURNS void
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      job_id uuid;
    BEGIN
      INSERT INTO outbox.security_outbox_messages
        (id, job_id, purpose, challenge_id, invitation_id, channel, destination, locale, destination_hmac, expires_at, api_key_id${carriers ? ', carriers' : ''})
      VALUES ((p->>'message_id')::uuid, (p->>'job_id')::uuid, p->>'purpose', (p->>'challenge_id')::uuid, (p->>'invitation_id')::uuid,
              p->>'channel', p->>'destination', p->>'locale', decode(p->>'destination_hmac', 'hex'), (p->>'expires_at')::timestamptz,
              (p->>'api_key_id')::uuid${carriers ? `, (SELECT array_agg(c ORDER BY n) FROM jsonb_array_elements_text(p->'carriers') WITH ORDINALITY AS e (c, n))` : ''});
      INSERT INTO outbox.security_outbox_ciphertexts (message_id, envelope) VALUES ((p->>'message_id')::uuid, p->>'envelope');
      job_id := outbox.insert_delivery_job(p->>'job_json');
      IF job_id IS DISTINCT FROM (p->>'job_id')::uuid THEN
        RAISE EXCEPTION 'the job inserted is not the message''s' USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END $$;`

const IDENTITY = (carriers: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.refuse_message_identity_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'security outbox message %: destination, channel, purpose, challenge and invitation${carriers ? ', carriers' : ''} never change', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
    END $$;
    DROP TRIGGER messages_identity_immutable ON outbox.security_outbox_messages;
    CREATE TRIGGER messages_identity_immutable BEFORE UPDATE ON outbox.security_outbox_messages
      FOR EACH ROW
      WHEN (OLD.destination IS DISTINCT FROM NEW.destination OR OLD.channel IS DISTINCT FROM NEW.channel
         OR OLD.purpose IS DISTINCT FROM NEW.purpose OR OLD.challenge_id IS DISTINCT FROM NEW.challenge_id
         OR OLD.invitation_id IS DISTINCT FROM NEW.invitation_id${carriers ? ' OR OLD.carriers IS DISTINCT FROM NEW.carriers' : ''})
      EXECUTE FUNCTION outbox.refuse_message_identity_change();`

const AVAILABLE = (nullWhenUnregistered: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.available_channels() RETURNS text[]
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT ${nullWhenUnregistered ? `CASE WHEN NOT EXISTS (SELECT FROM outbox.delivery_channel_registrations) THEN NULL ELSE ` : ''}coalesce(array_agg(DISTINCT channel ORDER BY channel), '{}')${nullWhenUnregistered ? ' END' : ''}
        FROM outbox.current_channel_registrations() r, unnest(r.channels) AS channel
    $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.security_outbox_messages
      ADD COLUMN carriers text[] CONSTRAINT security_outbox_messages_carriers_check
        CHECK (cardinality(carriers) > 0 AND carriers <@ ARRAY['whatsapp', 'sms'] AND array_position(carriers, NULL) IS NULL);
    ${IDENTITY(true)}
    ${ENQUEUE(true)}
    ${AVAILABLE(true)}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${AVAILABLE(false)}
    ${ENQUEUE(false)}
    ${IDENTITY(false)}
    ALTER TABLE outbox.security_outbox_messages DROP COLUMN carriers;
  `)
}
