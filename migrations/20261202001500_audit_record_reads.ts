import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * The audit trail people can read. `platform.audit_record_page` is the staff read:
 * it checks the staff session itself (`platform.staff_identity_for_session`, the one staff check)
 * and returns a keyset page, newest first by (at, id), filtered by action, actor, subject and a
 * time range. Audit records hold ids, action names and non-secret details only (no code, token or
 * address), so the page returns them as they are.
 *
 * Retention becomes a setting: `platform.sweep(p_now, p_limit, p_audit_keep)` beside the old
 * two-argument one (400 days), which stays for the previous release's worker.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION platform.audit_record_page(p_session_token_hash bytea, p_now timestamptz, p_limit integer,
                                               p_after_at timestamptz, p_after_id uuid, p_action text, p_actor text, p_subject text,
                                               p_from timestamptz, p_to timestamptz)
      RETURNS TABLE (id uuid, at timestamptz, actor text, action text, subject text, details jsonb)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY SELECT r.id, r.at, r.actor, r.action, r.subject, r.details
        FROM platform.audit_records r
       WHERE (p_after_at IS NULL OR (r.at, r.id) < (p_after_at, p_after_id))
         AND (p_action IS NULL OR r.action = p_action)
         AND (p_actor IS NULL OR r.actor = p_actor)
         AND (p_subject IS NULL OR r.subject = p_subject)
         AND (p_from IS NULL OR r.at >= p_from)
         AND (p_to IS NULL OR r.at < p_to)
       ORDER BY r.at DESC, r.id DESC
       LIMIT least(greatest(p_limit, 1), 201);
    END $$;

    CREATE FUNCTION platform.sweep(p_now timestamptz, p_limit integer, p_audit_keep interval)
      RETURNS TABLE (audit_records integer, idempotency_keys integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      -- The worker login calls this: a clock ahead of the database's or a keep below a week deletes no more.
      DELETE FROM platform.audit_records WHERE id IN (
        SELECT r.id FROM platform.audit_records r
         WHERE r.at < least(p_now, now()) - greatest(p_audit_keep, interval '7 days') LIMIT p_limit);
      GET DIAGNOSTICS audit_records = ROW_COUNT;
      DELETE FROM platform.idempotency_keys k WHERE (k.identity_id, k.scope, k.key) IN (
        SELECT i.identity_id, i.scope, i.key FROM platform.idempotency_keys i WHERE i.created_at < p_now - interval '1 day' LIMIT p_limit);
      GET DIAGNOSTICS idempotency_keys = ROW_COUNT;
      RETURN NEXT;
    END $$;

    REVOKE ALL ON FUNCTION platform.audit_record_page(bytea, timestamptz, integer, timestamptz, uuid, text, text, text, timestamptz, timestamptz),
      platform.sweep(timestamptz, integer, interval) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.audit_record_page(bytea, timestamptz, integer, timestamptz, uuid, text, text, text, timestamptz, timestamptz)
      TO ${API_ROLE};
    GRANT EXECUTE ON FUNCTION platform.sweep(timestamptz, integer, interval) TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION platform.sweep(timestamptz, integer, interval);
    DROP FUNCTION platform.audit_record_page(bytea, timestamptz, integer, timestamptz, uuid, text, text, text, timestamptz, timestamptz);
  `)
}
