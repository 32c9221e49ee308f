import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from './20261130000100_roles.ts'

/**
 * The outage hold (a fleet-wide circuit breaker per provider) and the provider each attempt used.
 *
 * `outbox.provider_states`: one row per provider (bounded by the provider count, so no retention
 * rule). Every worker's record step counts transient answers (UNAVAILABLE, INDETERMINATE) in
 * `failure_streak` and zeroes it on any answer that proves the provider is there; a streak long
 * enough marks the provider `down`. While down its messages are held without spending attempts and
 * one probe at a time goes to it: `probe_until` is the lease of the probe in flight (a crashed
 * prober's lease simply lapses), `next_probe_at` when the next may start, `probe_interval_ms` the
 * interval that grows with each failed probe. The web reads the table for the backlog view and the
 * gauges; nothing in it is secret.
 *
 * `security_outbox_attempts.provider`: which provider an attempt went to (the staff message view
 * shows it). Nullable: rows written before, and by a previous release's worker during a rolling
 * upgrade, have none.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE outbox.provider_states (
      provider text PRIMARY KEY CHECK (provider IN ('ses', 'smtp', 'wasender')),
      channel text NOT NULL CHECK (channel IN ('email', 'whatsapp')),
      state text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'down')),
      failure_streak integer NOT NULL DEFAULT 0 CHECK (failure_streak >= 0),
      last_failure_at timestamptz,
      down_since timestamptz,
      probe_interval_ms integer CHECK (probe_interval_ms > 0),
      next_probe_at timestamptz,
      probe_until timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT provider_states_down_chk CHECK ((state = 'down') = (down_since IS NOT NULL AND next_probe_at IS NOT NULL AND probe_interval_ms IS NOT NULL))
    );
    GRANT SELECT, INSERT, UPDATE ON outbox.provider_states TO ${WORKER_ROLE};
    GRANT SELECT ON outbox.provider_states TO ${API_ROLE};

    ALTER TABLE outbox.security_outbox_attempts
      ADD COLUMN provider text CHECK (provider IN ('ses', 'smtp', 'wasender'));

    CREATE OR REPLACE FUNCTION outbox.message_history(p_session_token_hash bytea, p_message_id uuid) RETURNS jsonb
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      result jsonb;
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, now());
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id;
      IF m.id IS NULL THEN RETURN NULL; END IF;
      SELECT jsonb_build_object(
        'message', jsonb_build_object(
          'messageId', m.id, 'purpose', m.purpose, 'channel', m.channel, 'maskedDestination', outbox.mask_destination(m.destination),
          'locale', m.locale, 'state', m.state, 'attemptCount', m.attempt_count, 'createdAt', m.created_at, 'availableAt', m.available_at,
          'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at, 'expiresAt', m.expires_at),
        'attempts', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'attemptNo', a.attempt_no, 'provider', a.provider, 'outcome', a.outcome, 'failureClass', a.failure_class,
            'providerMessageId', a.provider_message_id, 'retryAfterAt', a.retry_after_at, 'durationMs', a.duration_ms,
            'attemptedAt', a.attempted_at) ORDER BY a.attempt_no)
          FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb),
        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'lastFailureClass', d.last_failure_class, 'deadLetteredAt', d.dead_lettered_at)
          FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id),
        'events', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'event', e.event, 'subtype', e.subtype, 'occurredAt', e.occurred_at, 'receivedAt', e.received_at) ORDER BY e.occurred_at, e.id)
          FROM outbox.security_outbox_delivery_events e WHERE e.message_id = m.id), '[]'::jsonb))
        INTO result;
      RETURN result;
    END $$;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION outbox.message_history(p_session_token_hash bytea, p_message_id uuid) RETURNS jsonb
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      m record;
      result jsonb;
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, now());
      SELECT * INTO m FROM outbox.security_outbox_messages WHERE id = p_message_id;
      IF m.id IS NULL THEN RETURN NULL; END IF;
      SELECT jsonb_build_object(
        'message', jsonb_build_object(
          'messageId', m.id, 'purpose', m.purpose, 'channel', m.channel, 'maskedDestination', outbox.mask_destination(m.destination),
          'locale', m.locale, 'state', m.state, 'attemptCount', m.attempt_count, 'createdAt', m.created_at, 'availableAt', m.available_at,
          'publishedAt', m.published_at, 'deadLetteredAt', m.dead_lettered_at, 'expiresAt', m.expires_at),
        'attempts', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'attemptNo', a.attempt_no, 'outcome', a.outcome, 'failureClass', a.failure_class, 'providerMessageId', a.provider_message_id,
            'retryAfterAt', a.retry_after_at, 'durationMs', a.duration_ms, 'attemptedAt', a.attempted_at) ORDER BY a.attempt_no)
          FROM outbox.security_outbox_attempts a WHERE a.message_id = m.id), '[]'::jsonb),
        'deadLetter', (SELECT jsonb_build_object('reason', d.reason, 'lastFailureClass', d.last_failure_class, 'deadLetteredAt', d.dead_lettered_at)
          FROM outbox.security_outbox_dead_letters d WHERE d.message_id = m.id),
        'events', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'event', e.event, 'subtype', e.subtype, 'occurredAt', e.occurred_at, 'receivedAt', e.received_at) ORDER BY e.occurred_at, e.id)
          FROM outbox.security_outbox_delivery_events e WHERE e.message_id = m.id), '[]'::jsonb))
        INTO result;
      RETURN result;
    END $$;
    ALTER TABLE outbox.security_outbox_attempts DROP COLUMN provider;
    DROP TABLE outbox.provider_states;
  `)
}
