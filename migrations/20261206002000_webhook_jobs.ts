import type { Knex } from 'knex'
import { WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * Events out on pg-boss jobs (docs/events.md "Delivery"): the worker delivers each (event, endpoint)
 * as a job of the queue `webhook-delivery` instead of claiming rows itself.
 *
 * - `platform.append_event` still appends the event in the fact's transaction, and notes on it the
 *   endpoints that subscribe then (`fan_out_to`): an endpoint still hears only what happened after
 *   it was created. The delivery rows are no longer written there: the worker's fan-out job writes
 *   them and their jobs in one transaction (`fan_out_to` back to NULL), woken by the same NOTIFY.
 * - `job_id` names the pg-boss job that owns a pending delivery. A pending row without one (written
 *   before this migration, or redriven) is given one by the fan-out.
 * - `leased_until = 'infinity'` on a row a job owns keeps the previous release's worker, which
 *   claims due rows whose lease lapsed, away from it during a rolling upgrade; the rows that worker
 *   still leases are left to it until its lease lapses.
 * - The redrive clears `job_id`, so the fan-out queues the redriven rows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE platform.events ADD COLUMN fan_out_to uuid[];
    CREATE INDEX events_fan_out_idx ON platform.events (occurred_at) WHERE fan_out_to IS NOT NULL;
    ALTER TABLE platform.webhook_deliveries ADD COLUMN job_id uuid;
    CREATE INDEX webhook_deliveries_unqueued_idx ON platform.webhook_deliveries (next_attempt_at)
      WHERE state = 'pending' AND job_id IS NULL;

    CREATE OR REPLACE FUNCTION platform.append_event(p_type text, p_payload jsonb) RETURNS uuid
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      event_id uuid;
      endpoints uuid[];
    BEGIN
      SELECT array_agg(e.id) INTO endpoints FROM platform.webhook_endpoints e
       WHERE e.disabled_at IS NULL AND p_type = ANY (e.events);
      INSERT INTO platform.events (type, payload, fan_out_to) VALUES (p_type, jsonb_strip_nulls(p_payload), endpoints)
        RETURNING id INTO event_id;
      IF endpoints IS NOT NULL THEN PERFORM pg_notify('sealpost_webhook_deliveries', ''); END IF;
      RETURN event_id;
    END $$;

    CREATE OR REPLACE FUNCTION platform.redrive_webhook_deliveries(p_session_token_hash bytea, p_now timestamptz, p_endpoint_id uuid)
      RETURNS integer
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      redriven integer;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM platform.webhook_endpoints WHERE id = p_endpoint_id AND disabled_at IS NULL) THEN RETURN NULL; END IF;
      UPDATE platform.webhook_deliveries SET state = 'pending', attempt_count = 0, next_attempt_at = p_now, leased_until = NULL,
             finished_at = NULL, job_id = NULL
       WHERE endpoint_id = p_endpoint_id AND state = 'dead_lettered';
      GET DIAGNOSTICS redriven = ROW_COUNT;
      IF redriven > 0 THEN PERFORM pg_notify('sealpost_webhook_deliveries', ''); END IF;
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'webhook_endpoint.redriven', p_endpoint_id::text,
                jsonb_build_object('deliveries', redriven));
      RETURN redriven;
    END $$;

    -- The fan-out writes the delivery rows and marks the event fanned out; the delivery job owns its row.
    GRANT UPDATE (fan_out_to) ON platform.events TO ${WORKER_ROLE};
    GRANT INSERT (event_id, endpoint_id, next_attempt_at, leased_until, job_id) ON platform.webhook_deliveries TO ${WORKER_ROLE};
    GRANT UPDATE (job_id) ON platform.webhook_deliveries TO ${WORKER_ROLE};
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    REVOKE UPDATE (job_id) ON platform.webhook_deliveries FROM ${WORKER_ROLE};
    REVOKE INSERT (event_id, endpoint_id, next_attempt_at, leased_until, job_id) ON platform.webhook_deliveries FROM ${WORKER_ROLE};
    REVOKE UPDATE (fan_out_to) ON platform.events FROM ${WORKER_ROLE};

    -- Nothing is lost going back: events not fanned out yet get their rows, and rows a job owned
    -- become claimable by the row-claiming worker again.
    INSERT INTO platform.webhook_deliveries (event_id, endpoint_id, next_attempt_at)
      SELECT ev.id, e.id, now() FROM platform.events ev CROSS JOIN LATERAL unnest(ev.fan_out_to) AS t (endpoint_id)
        JOIN platform.webhook_endpoints e ON e.id = t.endpoint_id AND e.disabled_at IS NULL
      ON CONFLICT (event_id, endpoint_id) DO NOTHING;
    UPDATE platform.webhook_deliveries SET leased_until = NULL WHERE leased_until = 'infinity';

    CREATE OR REPLACE FUNCTION platform.redrive_webhook_deliveries(p_session_token_hash bytea, p_now timestamptz, p_endpoint_id uuid)
      RETURNS integer
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

    CREATE OR REPLACE FUNCTION platform.append_event(p_type text, p_payload jsonb) RETURNS uuid
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

    DROP INDEX platform.webhook_deliveries_unqueued_idx;
    ALTER TABLE platform.webhook_deliveries DROP COLUMN job_id;
    DROP INDEX platform.events_fan_out_idx;
    ALTER TABLE platform.events DROP COLUMN fan_out_to;
  `)
}
