import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * Per-person erasure and export (GDPR Art. 17 and 15; docs/privacy.md).
 *
 * `platform.erase_person_core` erases an identity in the caller's transaction: its identifiers,
 * password, sessions, elevations, devices, challenges, staff grant, idempotency keys, memberships,
 * the invitations addressed to its email addresses, every message to it (with ciphertexts,
 * attempts, dead letters, delivery events and the pg-boss jobs not in a worker's hands), the
 * suppressions of its destinations and the rate-limit hits of its buckets. The caller passes the
 * keyed hashes (destination HMACs, bucket keys): only the web holds the key. What must outlive
 * the person — organizations it created, invitations it sent, the audit trail — is re-pointed at
 * a random tombstone id (a disabled identity with nothing else), which is recorded nowhere beside
 * the erased id. The owner's CLI calls the core directly; staff call `platform.erase_person`,
 * which checks the staff session (the one staff check) and names the staff member as the actor.
 *
 * `platform.export_person` returns what is held about a person as JSON, with no code hash, token
 * hash, password hash or envelope; destinations are the person's own.
 *
 * The web role gains no DELETE grant: only EXECUTE on the two staff functions.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION platform.erase_person_core(p_identity uuid, p_destination_hmacs bytea[], p_bucket_keys bytea[], p_actor text, p_now timestamptz)
      RETURNS jsonb
      -- plpgsql: pg-boss's schema is installed after the migrations, so the body resolves at call time.
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      tombstone uuid := gen_random_uuid();
      ident text := p_identity::text;
      vals text[];
      emails text[];
      invitation_ids uuid[];
      message_ids uuid[];
      n jsonb := '{}';
      c integer;
    BEGIN
      PERFORM FROM identity.identities WHERE id = p_identity FOR UPDATE;
      IF NOT FOUND THEN RETURN NULL; END IF;
      -- An organization whose members would be left without an admin: another admin first.
      IF EXISTS (SELECT FROM organization.memberships mine
                  WHERE mine.identity_id = p_identity AND mine.role = 'admin'
                    AND EXISTS (SELECT FROM organization.memberships o WHERE o.organization_id = mine.organization_id AND o.identity_id <> p_identity)
                    AND NOT EXISTS (SELECT FROM organization.memberships o WHERE o.organization_id = mine.organization_id
                                       AND o.identity_id <> p_identity AND o.role = 'admin')) THEN
        RETURN jsonb_build_object('refusal', 'sole_admin');
      END IF;
      SELECT coalesce(array_agg(value), '{}'), coalesce(array_agg(value) FILTER (WHERE kind = 'email'), '{}')
        INTO vals, emails FROM identity.login_identifiers WHERE identity_id = p_identity AND verified_at IS NOT NULL;
      SELECT coalesce(array_agg(id), '{}') INTO invitation_ids FROM organization.invitations WHERE lower(email) = ANY (emails);
      SELECT coalesce(array_agg(m.id), '{}') INTO message_ids FROM outbox.security_outbox_messages m
       WHERE m.challenge_id IN (SELECT ch.id FROM identity.challenges ch WHERE ch.identity_id = p_identity)
          OR m.invitation_id = ANY (invitation_ids)
          OR m.destination = ANY (vals)
          OR m.destination_hmac = ANY (p_destination_hmacs);

      -- Jobs a worker holds (active) are left to it: its record finds no message and records nothing.
      DELETE FROM pgboss.job j WHERE j.name IN ('security-outbox', 'security-outbox-dlq') AND j.state <> 'active'
         AND j.data->>'messageId' = ANY (SELECT unnest(message_ids)::text);
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('jobs', c);
      DELETE FROM outbox.security_outbox_messages WHERE id = ANY (message_ids);
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('messages', c);
      DELETE FROM outbox.suppressed_destinations WHERE destination_hmac = ANY (p_destination_hmacs);
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('suppressions', c);
      DELETE FROM platform.rate_limit_hits WHERE bucket_key = ANY (p_bucket_keys);
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('rateLimitHits', c);

      DELETE FROM identity.elevations WHERE identity_id = p_identity;
      DELETE FROM identity.sessions WHERE identity_id = p_identity;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('sessions', c);
      DELETE FROM identity.trusted_devices WHERE identity_id = p_identity;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('devices', c);
      DELETE FROM identity.challenges WHERE identity_id = p_identity;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('challenges', c);
      DELETE FROM identity.password_credentials WHERE identity_id = p_identity;
      DELETE FROM platform.idempotency_keys WHERE identity_id = p_identity;
      DELETE FROM platform.staff_members WHERE identity_id = p_identity;
      DELETE FROM organization.memberships WHERE identity_id = p_identity;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('memberships', c);
      DELETE FROM organization.invitations WHERE id = ANY (invitation_ids);
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('invitations', c);

      -- What others' records need keeps its shape and names the tombstone instead.
      INSERT INTO identity.identities (id, status, created_at) VALUES (tombstone, 'disabled', p_now);
      UPDATE organization.organizations SET created_by = tombstone WHERE created_by = p_identity;
      UPDATE organization.invitations SET invited_by = tombstone WHERE invited_by = p_identity;
      UPDATE organization.invitations SET accepted_by = tombstone WHERE accepted_by = p_identity;
      UPDATE platform.audit_records
         SET actor = CASE WHEN actor = ident THEN tombstone::text ELSE actor END,
             subject = CASE WHEN subject = ident THEN tombstone::text ELSE subject END,
             details = replace(details::text, ident, tombstone::text)::jsonb
       WHERE actor = ident OR subject = ident OR strpos(details::text, ident) > 0;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('auditRecordsPseudonymised', c);

      DELETE FROM identity.login_identifiers WHERE identity_id = p_identity;
      GET DIAGNOSTICS c = ROW_COUNT; n := n || jsonb_build_object('identifiers', c);
      DELETE FROM identity.identities WHERE id = p_identity;

      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, p_actor, 'identity.erased', tombstone::text, n);
      RETURN jsonb_build_object('tombstoneId', tombstone, 'erased', n);
    END $$;

    CREATE FUNCTION platform.erase_person(p_session_token_hash bytea, p_now timestamptz, p_identity uuid,
                                          p_destination_hmacs bytea[], p_bucket_keys bytea[]) RETURNS jsonb
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
    BEGIN
      IF staff = p_identity THEN RETURN jsonb_build_object('refusal', 'own_identity'); END IF;
      -- Staff are granted and revoked by the owner alone (npm run staff); so are they erased (npm run people).
      IF EXISTS (SELECT FROM platform.staff_members WHERE identity_id = p_identity AND revoked_at IS NULL) THEN
        RETURN jsonb_build_object('refusal', 'staff_member');
      END IF;
      RETURN platform.erase_person_core(p_identity, p_destination_hmacs, p_bucket_keys, staff::text, p_now);
    END $$;

    CREATE FUNCTION platform.export_person_core(p_identity uuid, p_destination_hmacs bytea[]) RETURNS jsonb
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      WITH person AS (SELECT * FROM identity.identities WHERE id = p_identity),
           -- Only verified identifiers are the person's: an unconfirmed claim may name someone else's address.
           vals AS (SELECT kind, value FROM identity.login_identifiers WHERE identity_id = p_identity AND verified_at IS NOT NULL),
           messages AS (SELECT m.* FROM outbox.security_outbox_messages m
                         WHERE m.challenge_id IN (SELECT ch.id FROM identity.challenges ch WHERE ch.identity_id = p_identity)
                            OR m.destination IN (SELECT value FROM vals) OR m.destination_hmac = ANY (p_destination_hmacs))
      SELECT CASE WHEN NOT EXISTS (SELECT FROM person) THEN NULL ELSE jsonb_build_object(
        'identity', (SELECT jsonb_build_object('id', id, 'status', status, 'createdAt', created_at) FROM person),
        'identifiers', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', kind, 'value', value, 'verifiedAt', verified_at, 'createdAt', created_at) ORDER BY created_at), '[]')
                          FROM identity.login_identifiers WHERE identity_id = p_identity),
        'password', jsonb_build_object('set', EXISTS (SELECT FROM identity.password_credentials WHERE identity_id = p_identity),
                                       'updatedAt', (SELECT updated_at FROM identity.password_credentials WHERE identity_id = p_identity)),
        'sessions', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'createdAt', created_at, 'expiresAt', expires_at, 'revokedAt', revoked_at,
                                                                  'lastUsedAt', last_used_at) ORDER BY created_at), '[]')
                       FROM identity.sessions WHERE identity_id = p_identity),
        'devices', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'createdAt', created_at, 'expiresAt', expires_at) ORDER BY created_at), '[]')
                      FROM identity.trusted_devices WHERE identity_id = p_identity),
        'challenges', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'purpose', purpose, 'createdAt', created_at, 'expiresAt', expires_at,
                                                                    'consumedAt', consumed_at, 'revokedAt', revoked_at) ORDER BY created_at), '[]')
                         FROM identity.challenges WHERE identity_id = p_identity),
        'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                        'id', m.id, 'purpose', m.purpose, 'channel', m.channel, 'destination', m.destination, 'state', m.state,
                        'createdAt', m.created_at, 'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at,
                        'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object('attemptNo', a.attempt_no, 'outcome', a.outcome,
                                       'failureClass', a.failure_class, 'attemptedAt', a.attempted_at) ORDER BY a.attempt_no), '[]')
                                       FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id),
                        'deliveryEvents', (SELECT coalesce(jsonb_agg(jsonb_build_object('event', e.event, 'subtype', e.subtype, 'occurredAt', e.occurred_at)
                                             ORDER BY e.occurred_at), '[]') FROM outbox.security_outbox_delivery_events e WHERE e.message_id = m.id),
                        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'deadLetteredAt', d.dead_lettered_at)
                                         FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id)) ORDER BY m.id), '[]')
                       FROM messages m),
        'suppressions', (SELECT coalesce(jsonb_agg(jsonb_build_object('channel', s.channel, 'maskedDestination', s.masked_destination,
                                                                      'reason', s.reason, 'since', s.since) ORDER BY s.since), '[]')
                           FROM outbox.suppressed_destinations s WHERE s.destination_hmac = ANY (p_destination_hmacs)),
        'memberships', (SELECT coalesce(jsonb_agg(jsonb_build_object('organizationId', o.id, 'organizationName', o.name, 'role', ms.role,
                                                                     'createdAt', ms.created_at) ORDER BY ms.created_at), '[]')
                          FROM organization.memberships ms JOIN organization.organizations o ON o.id = ms.organization_id WHERE ms.identity_id = p_identity),
        'invitations', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', i.id, 'organizationId', i.organization_id, 'email', i.email, 'status', i.status,
                                                                     'createdAt', i.created_at, 'expiresAt', i.expires_at) ORDER BY i.created_at), '[]')
                          FROM organization.invitations i WHERE lower(i.email) IN (SELECT value FROM vals WHERE kind = 'email')),
        'staff', (SELECT jsonb_build_object('grantedAt', granted_at, 'revokedAt', revoked_at) FROM platform.staff_members WHERE identity_id = p_identity),
        'auditRecords', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', r.id, 'at', r.at, 'actor', r.actor, 'action', r.action, 'subject', r.subject)
                                         ORDER BY r.at), '[]')
                           FROM platform.audit_records r WHERE r.actor = p_identity::text OR r.subject = p_identity::text)
      ) END
    $$;

    CREATE FUNCTION platform.export_person(p_session_token_hash bytea, p_now timestamptz, p_identity uuid, p_destination_hmacs bytea[]) RETURNS jsonb
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      export jsonb := platform.export_person_core(p_identity, p_destination_hmacs);
    BEGIN
      IF export IS NOT NULL THEN
        INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
          VALUES (gen_random_uuid(), p_now, staff::text, 'identity.exported', p_identity::text, '{}');
      END IF;
      RETURN export;
    END $$;

    REVOKE ALL ON FUNCTION platform.erase_person_core(uuid, bytea[], bytea[], text, timestamptz),
      platform.erase_person(bytea, timestamptz, uuid, bytea[], bytea[]), platform.export_person_core(uuid, bytea[]),
      platform.export_person(bytea, timestamptz, uuid, bytea[]) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.erase_person(bytea, timestamptz, uuid, bytea[], bytea[]),
      platform.export_person(bytea, timestamptz, uuid, bytea[]) TO ${API_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION platform.export_person(bytea, timestamptz, uuid, bytea[]);
    DROP FUNCTION platform.export_person_core(uuid, bytea[]);
    DROP FUNCTION platform.erase_person(bytea, timestamptz, uuid, bytea[], bytea[]);
    DROP FUNCTION platform.erase_person_core(uuid, bytea[], bytea[], text, timestamptz);
  `)
}
