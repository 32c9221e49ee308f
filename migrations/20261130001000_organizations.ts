import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Organizations, memberships and invitations (DESIGN §3, seed 000 OB12). An invitation's token is
 * stored only as its SHA-256; its message in the security outbox names the invitation. The worker
 * reads an invitation's id, status and expiry and its organization's name — never the token hash,
 * the address it was sent to or any membership. The web revokes and accepts through one SECURITY
 * DEFINER function that dead-letters an invitation's unsent messages and does nothing else.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE SCHEMA organization;
    REVOKE ALL ON SCHEMA organization FROM PUBLIC;

    CREATE TABLE organization.organizations (
      id uuid PRIMARY KEY,
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
      created_by uuid NOT NULL REFERENCES identity.identities (id),
      created_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE organization.memberships (
      organization_id uuid NOT NULL REFERENCES organization.organizations (id),
      identity_id uuid NOT NULL REFERENCES identity.identities (id),
      role text NOT NULL CHECK (role IN ('admin', 'member')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, identity_id)
    );
    CREATE INDEX memberships_identity_idx ON organization.memberships (identity_id);

    CREATE TABLE organization.invitations (
      id uuid PRIMARY KEY,
      organization_id uuid NOT NULL REFERENCES organization.organizations (id),
      email text NOT NULL,
      token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
      invited_by uuid NOT NULL REFERENCES identity.identities (id),
      expires_at timestamptz NOT NULL,
      accepted_by uuid REFERENCES identity.identities (id),
      accepted_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT invitations_accepted_chk CHECK ((status = 'accepted') = (accepted_at IS NOT NULL AND accepted_by IS NOT NULL)),
      CONSTRAINT invitations_revoked_chk CHECK ((status = 'revoked') = (revoked_at IS NOT NULL))
    );
    -- One live invitation per address per organization: a re-invite revokes the previous one first.
    CREATE UNIQUE INDEX invitations_one_pending_uq ON organization.invitations (organization_id, email) WHERE status = 'pending';
    CREATE INDEX invitations_organization_created_idx ON organization.invitations (organization_id, created_at);
    CREATE INDEX invitations_email_created_idx ON organization.invitations (email, created_at);

    ALTER TABLE outbox.security_outbox_messages
      ADD CONSTRAINT messages_invitation_fk FOREIGN KEY (invitation_id) REFERENCES organization.invitations (id);
    CREATE INDEX messages_open_by_invitation_idx ON outbox.security_outbox_messages (invitation_id)
      WHERE state IN ('pending', 'leased');

    CREATE FUNCTION outbox.dead_letter_invitation_messages(p_invitation_id uuid, p_reason text) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      affected integer;
    BEGIN
      IF p_reason NOT IN ('invitation_revoked', 'invitation_accepted') THEN
        RAISE EXCEPTION 'reason % is not the web''s to give', p_reason USING ERRCODE = 'insufficient_privilege';
      END IF;
      WITH closed AS (
        UPDATE outbox.security_outbox_messages
           SET state = 'dead_lettered', dead_lettered_at = now()
         WHERE invitation_id = p_invitation_id AND state IN ('pending', 'leased')
        RETURNING id
      ), letters AS (
        INSERT INTO outbox.security_outbox_dead_letters (message_id, reason, dead_lettered_at)
        SELECT id, p_reason, now() FROM closed
      ), erased AS (
        DELETE FROM outbox.security_outbox_ciphertexts c USING closed WHERE c.message_id = closed.id
      )
      SELECT count(*) INTO affected FROM closed;
      RETURN affected;
    END $$;
    REVOKE ALL ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.dead_letter_invitation_messages(uuid, text) TO ${API_ROLE};

    -- Retention: invitations no longer pending, or long expired, that no message refers to any more
    -- (the outbox retention sweep deletes their messages first).
    CREATE FUNCTION organization.sweep_invitations(p_now timestamptz, p_keep interval, p_limit integer) RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      affected integer;
    BEGIN
      DELETE FROM organization.invitations i WHERE i.id IN (
        SELECT id FROM organization.invitations
         WHERE coalesce(accepted_at, revoked_at, expires_at) < p_now - p_keep
           AND NOT EXISTS (SELECT FROM outbox.security_outbox_messages m WHERE m.invitation_id = invitations.id)
         LIMIT p_limit);
      GET DIAGNOSTICS affected = ROW_COUNT;
      RETURN affected;
    END $$;
    REVOKE ALL ON FUNCTION organization.sweep_invitations(timestamptz, interval, integer) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION organization.sweep_invitations(timestamptz, interval, integer) TO ${WORKER_ROLE};

    GRANT USAGE ON SCHEMA organization TO ${API_ROLE}, ${WORKER_ROLE};
    GRANT SELECT, INSERT ON organization.organizations, organization.memberships TO ${API_ROLE};
    -- Invitations lock their organization row (FOR UPDATE needs UPDATE on some column) to serialize the limits.
    GRANT UPDATE (name) ON organization.organizations TO ${API_ROLE};
    GRANT SELECT, INSERT, UPDATE ON organization.invitations TO ${API_ROLE};
    GRANT SELECT (id, name) ON organization.organizations TO ${WORKER_ROLE};
    GRANT SELECT (id, organization_id, status, expires_at) ON organization.invitations TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.dead_letter_invitation_messages(uuid, text);
    DROP INDEX outbox.messages_open_by_invitation_idx;
    ALTER TABLE outbox.security_outbox_messages DROP CONSTRAINT messages_invitation_fk;
    DROP SCHEMA organization CASCADE;
  `)
}
