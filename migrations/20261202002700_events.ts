import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Signed events out (docs/events.md): the event log, webhook endpoints and one delivery row per
 * (event, endpoint).
 *
 * - Events are appended by triggers on the tables whose rows are the facts, so every path that
 *   writes a fact — web, worker, staff CLI, SECURITY DEFINER functions, a future path — appends its
 *   event in the fact's own transaction: one home, no path forgets, and a rolled-back fact leaves no
 *   event. The trigger functions are SECURITY DEFINER: neither process role can write an event
 *   itself.
 * - `platform.append_event` fans the event out in the same statement to every enabled endpoint
 *   subscribed to its type (a delivery row each), so an endpoint hears only what happened after it
 *   was created, and wakes the worker (NOTIFY, sent at commit).
 * - Payloads carry ids, kinds and masked destinations only (`outbox.mask_destination`).
 * - An endpoint's signing secret is stored only sealed under the outbox key ring (the web seals,
 *   the worker opens); `previous_secret_envelope` keeps the rotated-out secret until
 *   `previous_secret_until` so both sign during the overlap.
 * - The web reaches these tables only through the staff functions below, each checking the staff
 *   session itself; the worker claims and records deliveries and sweeps old ones.
 *
 * New objects and triggers only: the previous release's web and worker write the same rows as
 * before and never see the triggers.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE platform.events (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      type text NOT NULL CHECK (type IN (
        'message.accepted', 'message.published', 'message.delivered', 'message.bounced', 'message.complained',
        'message.dead_lettered', 'destination.suppressed', 'identity.created', 'sign_in_method.added',
        'sign_in_method.removed', 'password.changed', 'sessions.revoked', 'invitation.accepted')),
      occurred_at timestamptz NOT NULL DEFAULT now(),
      payload jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object')
    );
    CREATE INDEX events_occurred_idx ON platform.events (occurred_at);

    CREATE TABLE platform.webhook_endpoints (
      id uuid PRIMARY KEY,
      url text NOT NULL CHECK (char_length(url) <= 2048),
      events text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 13 AND events <@ ARRAY[
        'message.accepted', 'message.published', 'message.delivered', 'message.bounced', 'message.complained',
        'message.dead_lettered', 'destination.suppressed', 'identity.created', 'sign_in_method.added',
        'sign_in_method.removed', 'password.changed', 'sessions.revoked', 'invitation.accepted']::text[]),
      secret_envelope text NOT NULL,
      previous_secret_envelope text,
      previous_secret_until timestamptz,
      created_at timestamptz NOT NULL,
      created_by uuid NOT NULL,
      disabled_at timestamptz,
      CONSTRAINT webhook_endpoints_previous_chk CHECK ((previous_secret_envelope IS NULL) = (previous_secret_until IS NULL))
    );

    CREATE TABLE platform.webhook_deliveries (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      event_id uuid NOT NULL REFERENCES platform.events (id) ON DELETE CASCADE,
      endpoint_id uuid NOT NULL REFERENCES platform.webhook_endpoints (id) ON DELETE CASCADE,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead_lettered')),
      attempt_count integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
      next_attempt_at timestamptz NOT NULL,
      leased_until timestamptz,
      last_status_code integer,
      last_failure text CHECK (char_length(last_failure) <= 64),
      finished_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT webhook_deliveries_once UNIQUE (event_id, endpoint_id),
      CONSTRAINT webhook_deliveries_finished_chk CHECK ((state = 'pending') = (finished_at IS NULL))
    );
    CREATE INDEX webhook_deliveries_due_idx ON platform.webhook_deliveries (next_attempt_at) WHERE state = 'pending';
    CREATE INDEX webhook_deliveries_endpoint_idx ON platform.webhook_deliveries (endpoint_id, id DESC);
    CREATE INDEX webhook_deliveries_event_idx ON platform.webhook_deliveries (event_id);

    -- The one way an event is written: the event, its deliveries to every enabled endpoint that
    -- subscribed to its type, and a wake-up for the workers (delivered at commit, dropped on rollback).
    CREATE FUNCTION platform.append_event(p_type text, p_payload jsonb) RETURNS uuid
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      event_id uuid;
      fanned integer;
    BEGIN
      INSERT INTO platform.events (type, payload) VALUES (p_type, jsonb_strip_nulls(p_payload)) RETURNING id INTO event_id;
      INSERT INTO platform.webhook_deliveries (event_id, endpoint_id, next_attempt_at)
        SELECT event_id, e.id, now() FROM platform.webhook_endpoints e
         WHERE e.disabled_at IS NULL AND p_type = ANY (e.events);
      GET DIAGNOSTICS fanned = ROW_COUNT;
      IF fanned > 0 THEN PERFORM pg_notify('sealpost_webhook_deliveries', ''); END IF;
      RETURN event_id;
    END $$;

    CREATE FUNCTION platform.message_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        PERFORM platform.append_event('message.accepted', jsonb_build_object('messageId', NEW.id, 'purpose', NEW.purpose,
          'channel', NEW.channel, 'maskedDestination', outbox.mask_destination(NEW.destination)));
      ELSIF NEW.state = 'published' AND OLD.state IS DISTINCT FROM 'published' THEN
        PERFORM platform.append_event('message.published', jsonb_build_object('messageId', NEW.id, 'purpose', NEW.purpose,
          'channel', NEW.channel, 'attemptCount', NEW.attempt_count));
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER messages_events AFTER INSERT OR UPDATE OF state ON outbox.security_outbox_messages
      FOR EACH ROW EXECUTE FUNCTION platform.message_event();

    CREATE FUNCTION platform.dead_letter_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.append_event('message.dead_lettered', jsonb_build_object('messageId', NEW.message_id,
        'reason', NEW.reason, 'lastFailureClass', NEW.last_failure_class));
      RETURN NULL;
    END $$;
    CREATE TRIGGER dead_letters_events AFTER INSERT ON outbox.security_outbox_dead_letters
      FOR EACH ROW EXECUTE FUNCTION platform.dead_letter_event();

    CREATE FUNCTION platform.delivery_event_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF NEW.event IN ('delivered', 'bounced', 'complained') THEN
        PERFORM platform.append_event('message.' || NEW.event, jsonb_build_object('messageId', NEW.message_id, 'subtype', NEW.subtype,
          'providerOccurredAt', NEW.occurred_at));
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER delivery_events_events AFTER INSERT ON outbox.security_outbox_delivery_events
      FOR EACH ROW EXECUTE FUNCTION platform.delivery_event_event();

    CREATE FUNCTION platform.suppression_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.append_event('destination.suppressed', jsonb_build_object('suppressionId', NEW.id, 'channel', NEW.channel,
        'maskedDestination', NEW.masked_destination, 'reason', NEW.reason, 'messageId', NEW.message_id));
      RETURN NULL;
    END $$;
    CREATE TRIGGER suppressed_destinations_events AFTER INSERT ON outbox.suppressed_destinations
      FOR EACH ROW EXECUTE FUNCTION platform.suppression_event();

    -- An identity exists for the application once it is active (a pending sign-up is not one yet).
    CREATE FUNCTION platform.identity_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF NEW.status = 'active' AND (TG_OP = 'INSERT' OR OLD.status = 'pending') THEN
        PERFORM platform.append_event('identity.created', jsonb_build_object('identityId', NEW.id));
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER identities_events AFTER INSERT OR UPDATE OF status ON identity.identities
      FOR EACH ROW EXECUTE FUNCTION platform.identity_event();

    -- A sign-in method is a verified identifier: verifying one adds it, unverifying or deleting removes it.
    CREATE FUNCTION platform.sign_in_method_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      row_ record;
      was boolean := false;
      now_ boolean := false;
    BEGIN
      IF TG_OP <> 'INSERT' THEN was := OLD.verified_at IS NOT NULL; row_ := OLD; END IF;
      IF TG_OP <> 'DELETE' THEN now_ := NEW.verified_at IS NOT NULL; row_ := NEW; END IF;
      IF was = now_ THEN RETURN NULL; END IF;
      PERFORM platform.append_event(CASE WHEN now_ THEN 'sign_in_method.added' ELSE 'sign_in_method.removed' END,
        jsonb_build_object('identityId', row_.identity_id, 'signInMethodId', row_.id, 'kind', row_.kind,
          'maskedIdentifier', outbox.mask_destination(row_.value)));
      RETURN NULL;
    END $$;
    CREATE TRIGGER login_identifiers_events AFTER INSERT OR UPDATE OF verified_at OR DELETE ON identity.login_identifiers
      FOR EACH ROW EXECUTE FUNCTION platform.sign_in_method_event();

    -- A changed password of an active identity (a pending sign-up's resend replaces no one's password).
    CREATE FUNCTION platform.password_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF NEW.password_hash IS DISTINCT FROM OLD.password_hash
         AND EXISTS (SELECT 1 FROM identity.identities i WHERE i.id = NEW.identity_id AND i.status = 'active') THEN
        PERFORM platform.append_event('password.changed', jsonb_build_object('identityId', NEW.identity_id));
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER password_credentials_events AFTER UPDATE OF password_hash ON identity.password_credentials
      FOR EACH ROW EXECUTE FUNCTION platform.password_event();

    -- One event per identity and statement, however many sessions the statement revoked.
    CREATE FUNCTION platform.sessions_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      revoked record;
    BEGIN
      FOR revoked IN
        SELECT n.identity_id, count(*) AS sessions FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE o.revoked_at IS NULL AND n.revoked_at IS NOT NULL GROUP BY n.identity_id
      LOOP
        PERFORM platform.append_event('sessions.revoked', jsonb_build_object('identityId', revoked.identity_id, 'sessions', revoked.sessions));
      END LOOP;
      RETURN NULL;
    END $$;
    CREATE TRIGGER sessions_events AFTER UPDATE ON identity.sessions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION platform.sessions_event();

    CREATE FUNCTION platform.invitation_event() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF NEW.status = 'accepted' AND OLD.status <> 'accepted' THEN
        PERFORM platform.append_event('invitation.accepted', jsonb_build_object('invitationId', NEW.id,
          'organizationId', NEW.organization_id, 'identityId', NEW.accepted_by));
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER invitations_events AFTER UPDATE OF status ON organization.invitations
      FOR EACH ROW EXECUTE FUNCTION platform.invitation_event();

    -- An event goes with the row it names: a message swept by retention, an identity erased
    -- (docs/privacy.md) takes its events and their pending deliveries along, so no table keeps the
    -- ids of an erased person. What was already delivered cannot be called back.
    CREATE INDEX events_message_idx ON platform.events ((payload->>'messageId'));
    CREATE INDEX events_identity_idx ON platform.events ((payload->>'identityId'));
    CREATE FUNCTION platform.forget_events() RETURNS trigger
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      IF TG_TABLE_NAME = 'security_outbox_messages' THEN
        DELETE FROM platform.events WHERE payload->>'messageId' = OLD.id::text;
      ELSE
        DELETE FROM platform.events WHERE payload->>'identityId' = OLD.id::text;
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER messages_forget_events AFTER DELETE ON outbox.security_outbox_messages
      FOR EACH ROW EXECUTE FUNCTION platform.forget_events();
    CREATE TRIGGER identities_forget_events AFTER DELETE ON identity.identities
      FOR EACH ROW EXECUTE FUNCTION platform.forget_events();

    -- Staff functions: each checks the staff session itself; creating, rotating, disabling and
    -- redriving are audited in the caller's transaction.
    CREATE FUNCTION platform.create_webhook_endpoint(p_session_token_hash bytea, p_now timestamptz, p_id uuid, p_url text,
                                                     p_events text[], p_secret_envelope text) RETURNS void
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
    BEGIN
      INSERT INTO platform.webhook_endpoints (id, url, events, secret_envelope, created_at, created_by)
        VALUES (p_id, p_url, p_events, p_secret_envelope, p_now, staff);
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'webhook_endpoint.created', p_id::text, jsonb_build_object('events', p_events));
    END $$;

    CREATE FUNCTION platform.webhook_endpoint_list(p_session_token_hash bytea, p_now timestamptz)
      RETURNS TABLE (id uuid, url text, events text[], created_at timestamptz, disabled_at timestamptz,
                     pending bigint, dead_lettered bigint)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT e.id, e.url, e.events, e.created_at, e.disabled_at,
        (SELECT count(*) FROM platform.webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending'),
        (SELECT count(*) FROM platform.webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'dead_lettered')
        FROM platform.webhook_endpoints e ORDER BY e.created_at DESC, e.id DESC LIMIT 200;
    END $$;

    -- Disabling stops every pending delivery of the endpoint (dead-lettered 'endpoint_disabled').
    CREATE FUNCTION platform.disable_webhook_endpoint(p_session_token_hash bytea, p_now timestamptz, p_id uuid) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
    BEGIN
      UPDATE platform.webhook_endpoints SET disabled_at = p_now WHERE id = p_id AND disabled_at IS NULL;
      IF NOT FOUND THEN RETURN EXISTS (SELECT 1 FROM platform.webhook_endpoints WHERE id = p_id); END IF;
      UPDATE platform.webhook_deliveries SET state = 'dead_lettered', finished_at = p_now, last_failure = 'endpoint_disabled', leased_until = NULL
       WHERE endpoint_id = p_id AND state = 'pending';
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'webhook_endpoint.disabled', p_id::text, '{}'::jsonb);
      RETURN true;
    END $$;

    -- The new secret signs from now on; the previous one signs beside it until p_previous_until.
    CREATE FUNCTION platform.rotate_webhook_secret(p_session_token_hash bytea, p_now timestamptz, p_id uuid, p_secret_envelope text,
                                                   p_previous_until timestamptz) RETURNS boolean
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
    BEGIN
      UPDATE platform.webhook_endpoints SET previous_secret_envelope = secret_envelope, previous_secret_until = p_previous_until,
             secret_envelope = p_secret_envelope
       WHERE id = p_id AND disabled_at IS NULL;
      IF NOT FOUND THEN RETURN false; END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'webhook_endpoint.secret_rotated', p_id::text,
                jsonb_build_object('previousUntil', p_previous_until));
      RETURN true;
    END $$;

    CREATE FUNCTION platform.webhook_endpoint_url(p_session_token_hash bytea, p_now timestamptz, p_id uuid) RETURNS text
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN (SELECT url FROM platform.webhook_endpoints WHERE id = p_id AND disabled_at IS NULL);
    END $$;

    CREATE FUNCTION platform.webhook_delivery_page(p_session_token_hash bytea, p_now timestamptz, p_endpoint_id uuid, p_limit integer)
      RETURNS TABLE (id bigint, event_id uuid, event_type text, occurred_at timestamptz, state text, attempt_count integer,
                     next_attempt_at timestamptz, last_status_code integer, last_failure text, finished_at timestamptz)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT d.id, d.event_id, ev.type, ev.occurred_at, d.state, d.attempt_count, d.next_attempt_at,
             d.last_status_code, d.last_failure, d.finished_at
        FROM platform.webhook_deliveries d JOIN platform.events ev ON ev.id = d.event_id
       WHERE d.endpoint_id = p_endpoint_id ORDER BY d.id DESC LIMIT least(greatest(p_limit, 1), 100);
    END $$;

    -- Dead-lettered deliveries of an enabled endpoint go out again (same webhook-id), attempts from zero.
    CREATE FUNCTION platform.redrive_webhook_deliveries(p_session_token_hash bytea, p_now timestamptz, p_endpoint_id uuid) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      redriven integer;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM platform.webhook_endpoints WHERE id = p_endpoint_id AND disabled_at IS NULL) THEN RETURN NULL; END IF;
      UPDATE platform.webhook_deliveries SET state = 'pending', attempt_count = 0, next_attempt_at = p_now, leased_until = NULL,
             finished_at = NULL
       WHERE endpoint_id = p_endpoint_id AND state = 'dead_lettered';
      GET DIAGNOSTICS redriven = ROW_COUNT;
      IF redriven > 0 THEN PERFORM pg_notify('sealpost_webhook_deliveries', ''); END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'webhook_endpoint.redriven', p_endpoint_id::text,
                jsonb_build_object('deliveries', redriven));
      RETURN redriven;
    END $$;

    REVOKE ALL ON FUNCTION platform.append_event(text, jsonb), platform.forget_events(), platform.message_event(), platform.dead_letter_event(),
      platform.delivery_event_event(), platform.suppression_event(), platform.identity_event(), platform.sign_in_method_event(),
      platform.password_event(), platform.sessions_event(), platform.invitation_event(),
      platform.create_webhook_endpoint(bytea, timestamptz, uuid, text, text[], text),
      platform.webhook_endpoint_list(bytea, timestamptz), platform.disable_webhook_endpoint(bytea, timestamptz, uuid),
      platform.rotate_webhook_secret(bytea, timestamptz, uuid, text, timestamptz),
      platform.webhook_endpoint_url(bytea, timestamptz, uuid),
      platform.webhook_delivery_page(bytea, timestamptz, uuid, integer),
      platform.redrive_webhook_deliveries(bytea, timestamptz, uuid) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.create_webhook_endpoint(bytea, timestamptz, uuid, text, text[], text),
      platform.webhook_endpoint_list(bytea, timestamptz), platform.disable_webhook_endpoint(bytea, timestamptz, uuid),
      platform.rotate_webhook_secret(bytea, timestamptz, uuid, text, timestamptz),
      platform.webhook_endpoint_url(bytea, timestamptz, uuid),
      platform.webhook_delivery_page(bytea, timestamptz, uuid, integer),
      platform.redrive_webhook_deliveries(bytea, timestamptz, uuid) TO ${API_ROLE};
    -- The worker sends: it reads events and endpoints, claims and records deliveries, sweeps old ones.
    GRANT SELECT, DELETE ON platform.events TO ${WORKER_ROLE};
    GRANT SELECT (id, url, secret_envelope, previous_secret_envelope, previous_secret_until, disabled_at)
      ON platform.webhook_endpoints TO ${WORKER_ROLE};
    GRANT SELECT, UPDATE (state, attempt_count, next_attempt_at, leased_until, last_status_code, last_failure, finished_at), DELETE
      ON platform.webhook_deliveries TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER identities_forget_events ON identity.identities;
    DROP TRIGGER messages_forget_events ON outbox.security_outbox_messages;
    DROP FUNCTION platform.forget_events();
    DROP TRIGGER invitations_events ON organization.invitations;
    DROP TRIGGER sessions_events ON identity.sessions;
    DROP TRIGGER password_credentials_events ON identity.password_credentials;
    DROP TRIGGER login_identifiers_events ON identity.login_identifiers;
    DROP TRIGGER identities_events ON identity.identities;
    DROP TRIGGER suppressed_destinations_events ON outbox.suppressed_destinations;
    DROP TRIGGER delivery_events_events ON outbox.security_outbox_delivery_events;
    DROP TRIGGER dead_letters_events ON outbox.security_outbox_dead_letters;
    DROP TRIGGER messages_events ON outbox.security_outbox_messages;
    DROP FUNCTION platform.redrive_webhook_deliveries(bytea, timestamptz, uuid);
    DROP FUNCTION platform.webhook_delivery_page(bytea, timestamptz, uuid, integer);
    DROP FUNCTION platform.webhook_endpoint_url(bytea, timestamptz, uuid);
    DROP FUNCTION platform.rotate_webhook_secret(bytea, timestamptz, uuid, text, timestamptz);
    DROP FUNCTION platform.disable_webhook_endpoint(bytea, timestamptz, uuid);
    DROP FUNCTION platform.webhook_endpoint_list(bytea, timestamptz);
    DROP FUNCTION platform.create_webhook_endpoint(bytea, timestamptz, uuid, text, text[], text);
    DROP FUNCTION platform.invitation_event(), platform.sessions_event(), platform.password_event(), platform.sign_in_method_event(),
      platform.identity_event(), platform.suppression_event(), platform.delivery_event_event(), platform.dead_letter_event(),
      platform.message_event(), platform.append_event(text, jsonb);
    DROP TABLE platform.webhook_deliveries, platform.webhook_endpoints, platform.events;
  `)
}
