import type { Knex } from 'knex'
import { WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Retention for the identity rows that grow with every flow (seed 002, hop 12: a table nobody
 * prunes grows forever). One SECURITY DEFINER function does exactly this pruning, so the worker's
 * retention sweep can run it without any privilege on session tokens or password hashes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION identity.sweep_expired(p_now timestamptz, p_keep interval, p_limit integer)
      RETURNS TABLE (sessions integer, elevations integer, challenges integer, abandoned_sign_ups integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      cutoff timestamptz := p_now - p_keep;
    BEGIN
      DELETE FROM identity.elevations WHERE id IN (SELECT id FROM identity.elevations WHERE expires_at < cutoff LIMIT p_limit);
      GET DIAGNOSTICS elevations = ROW_COUNT;
      DELETE FROM identity.sessions s WHERE s.id IN (
        SELECT id FROM identity.sessions WHERE coalesce(revoked_at, expires_at) < cutoff LIMIT p_limit)
        AND NOT EXISTS (SELECT FROM identity.elevations e WHERE e.session_id = s.id);
      GET DIAGNOSTICS sessions = ROW_COUNT;
      -- A challenge goes once it is long over and no outbox message refers to it any more.
      DELETE FROM identity.challenges c WHERE c.id IN (
        SELECT id FROM identity.challenges WHERE expires_at < cutoff LIMIT p_limit)
        AND NOT EXISTS (SELECT FROM outbox.security_outbox_messages m WHERE m.challenge_id = c.id);
      GET DIAGNOSTICS challenges = ROW_COUNT;
      -- A sign-up never confirmed: the pending identity and its unverified claim, once nothing refers to them.
      WITH abandoned AS (
        SELECT i.id FROM identity.identities i
         WHERE i.status = 'pending' AND i.created_at < cutoff
           AND NOT EXISTS (SELECT FROM identity.challenges c WHERE c.identity_id = i.id)
         LIMIT p_limit
      ), claims AS (
        DELETE FROM identity.login_identifiers li USING abandoned WHERE li.identity_id = abandoned.id AND li.verified_at IS NULL
      )
      DELETE FROM identity.identities i USING abandoned WHERE i.id = abandoned.id;
      GET DIAGNOSTICS abandoned_sign_ups = ROW_COUNT;
      RETURN NEXT;
    END $$;
    REVOKE ALL ON FUNCTION identity.sweep_expired(timestamptz, interval, integer) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION identity.sweep_expired(timestamptz, interval, integer) TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION identity.sweep_expired(timestamptz, interval, integer)')
}
