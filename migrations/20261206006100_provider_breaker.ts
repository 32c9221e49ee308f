import type { Knex } from 'knex'

/**
 * Provider health as a breaker, and pauses per provider (docs/delivery.md "The outage hold and
 * failover", "Provider pauses").
 *
 * - `attempts_provider_window_idx` on `security_outbox_attempts (provider, attempted_at)`: a worker
 *   that records a provider-side failure reads that provider's last calls (at most 100, of the last
 *   two minutes) backwards along it, so the fleet's failure rate costs a short index range, never a scan,
 *   and a publication costs nothing more than its attempt row.
 * - `security_outbox_attempts.recipient_only`: the answer was about this recipient alone (a relay's
 *   4xx to one RCPT TO, a pair rate limit), so the failure rate never counts it. NULL on rows of the
 *   previous release's worker, which counts its own streak and never reads this.
 * - `outbox.paused_providers`: a THROTTLED answer pauses the provider that gave it, not its channel
 *   (an SMTP relay's 452 no longer pauses SES). One row per provider (bounded: no retention rule).
 *   The previous release's worker keeps writing and reading `outbox.provider_pauses` per channel;
 *   this release still honours those rows (a channel pause holds every provider of it) and writes
 *   only these. The web reads them beside `outbox.provider_states` (the backlog view, the gauges).
 * - `outbox.running_pauses`: the staff view of both, one row per pause (`provider` NULL for a
 *   channel's). `outbox.lift_channel_pause` (same signature and answer) now also ends the pauses
 *   of the channel's providers.
 */
const PROVIDERS = `'ses', 'smtp', 'wasender', 'twilio', 'whatsapp_cloud'`
const CHANNELS = `'email', 'whatsapp', 'sms'`

const LIFT = (providers: boolean) => `
    CREATE OR REPLACE FUNCTION outbox.lift_channel_pause(p_session_token_hash bytea, p_now timestamptz, p_channel text)
      RETURNS TABLE (lifted boolean, released integer)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      staff uuid := platform.staff_identity_for_session(p_session_token_hash, p_now);
      was record;
      called_back integer;${providers ? '\n      ended text[];' : ''}
    BEGIN
      SELECT p.paused_until, p.throttle_streak INTO was FROM outbox.provider_pauses p
       WHERE p.channel = p_channel AND p.paused_until > p_now FOR UPDATE;${
         providers
           ? `
      WITH lifted AS (
        UPDATE outbox.paused_providers SET paused_until = p_now, updated_at = p_now
         WHERE paused_providers.channel = p_channel AND paused_providers.paused_until > p_now
        RETURNING provider)
      SELECT array_agg(provider ORDER BY provider) INTO ended FROM lifted;
      IF was.paused_until IS NULL AND ended IS NULL THEN RETURN QUERY SELECT false, 0; RETURN; END IF;`
           : `
      IF was.paused_until IS NULL THEN RETURN QUERY SELECT false, 0; RETURN; END IF;`
       }
      UPDATE outbox.provider_pauses SET paused_until = p_now, updated_at = p_now WHERE provider_pauses.channel = p_channel${
        providers ? ' AND provider_pauses.paused_until > p_now' : ''
      };
      called_back := outbox.release_held_jobs(p_channel, p_now, 'security-outbox');
      INSERT INTO platform.audit_records (id, at, actor, action, subject, details)
        VALUES (gen_random_uuid(), p_now, staff::text, 'security_outbox.channel_pause_lifted', p_channel,
                jsonb_build_object('pausedUntil', was.paused_until, 'throttleStreak', was.throttle_streak, 'released', called_back${
                  providers ? `, 'providers', to_jsonb(coalesce(ended, '{}'))` : ''
                }));
      RETURN QUERY SELECT true, called_back;
    END $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX attempts_provider_window_idx ON outbox.security_outbox_attempts (provider, attempted_at) WHERE provider IS NOT NULL;
    ALTER TABLE outbox.security_outbox_attempts ADD COLUMN recipient_only boolean;

    CREATE TABLE outbox.paused_providers (
      provider text PRIMARY KEY CHECK (provider IN (${PROVIDERS})),
      channel text NOT NULL CHECK (channel IN (${CHANNELS})),
      paused_until timestamptz NOT NULL,
      throttle_streak integer NOT NULL DEFAULT 0 CHECK (throttle_streak >= 0),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    GRANT SELECT, INSERT, UPDATE ON outbox.paused_providers TO sealpost_worker;
    GRANT SELECT ON outbox.paused_providers TO sealpost_api;

    CREATE FUNCTION outbox.running_pauses(p_session_token_hash bytea, p_now timestamptz)
      RETURNS TABLE (channel text, provider text, paused_until timestamptz, throttle_streak integer)
      LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM platform.staff_identity_for_session(p_session_token_hash, p_now);
      RETURN QUERY
        SELECT c.channel, NULL::text, c.paused_until, c.throttle_streak FROM outbox.provider_pauses c WHERE c.paused_until > p_now
        UNION ALL
        SELECT p.channel, p.provider, p.paused_until, p.throttle_streak FROM outbox.paused_providers p WHERE p.paused_until > p_now
        ORDER BY 1, 2 NULLS FIRST;
    END $$;
    REVOKE ALL ON FUNCTION outbox.running_pauses(bytea, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.running_pauses(bytea, timestamptz) TO sealpost_api;
    ${LIFT(true)}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${LIFT(false)}
    DROP FUNCTION outbox.running_pauses(bytea, timestamptz);
    DROP TABLE outbox.paused_providers;
    ALTER TABLE outbox.security_outbox_attempts DROP COLUMN recipient_only;
    DROP INDEX outbox.attempts_provider_window_idx;
  `)
}
