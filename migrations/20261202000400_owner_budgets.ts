import type { Knex } from 'knex'
import { API_ROLE } from './20261130000100_roles.ts'

/**
 * What a stranger spends is the stranger's (docs/security.md "Budgets from the owner's side").
 *
 * - `identity.trusted_devices`: a client that signed in (or confirmed a sign-up) gets a device
 *   cookie; the SHA-256 of its token is kept here with the identity it signed in as. Such a client
 *   spends budgets of its own instead of the anonymous ones a stranger can exhaust (OWASP's device
 *   cookies). Bounded by the web as it writes: an identity keeps its newest 20 live devices.
 * - `platform.spend_budget_tiers(tiers, now)`: several sliding windows spent in order (each a
 *   `platform.rate_limit_window`): the first one without room refuses, with its wait; the ones
 *   before it stay spent, so a client past its own slice spends nothing of the shared ceiling.
 * - `identity.issue_challenge`: in `hidden` mode the destination's budget is the request's tiers
 *   (`destination_budgets`: the client's slice and the destination's ceiling, or the trusted
 *   device's own), when given; a caller of the previous release sends only `destination_buckets`,
 *   which keep their meaning (a rolling upgrade runs both).
 */
const issueChallenge = (budget: string) => `
    CREATE OR REPLACE FUNCTION identity.issue_challenge(p jsonb) RETURNS jsonb
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      now_at timestamptz := (p->>'now')::timestamptz;
      subject_identity uuid := (p->>'identity_id')::uuid;
      subject_login uuid := (p->>'login_identifier_id')::uuid;
      throwaway_identity uuid := (p->>'throwaway_identity_id')::uuid;
      throwaway_login uuid := (p->>'throwaway_login_identifier_id')::uuid;
      outcome text := 'no_subject';
      wait_seconds double precision;
      challenge_id uuid;
      failure text;
    BEGIN
      IF p->>'mode' = 'visible' THEN
        challenge_id := identity.issue_challenge_for(p, subject_identity, subject_login, (p->>'count_destination')::boolean);
        RETURN jsonb_build_object('outcome', 'issued', 'challenge_id', challenge_id);
      END IF;
      IF p->>'mode' IS DISTINCT FROM 'hidden' THEN
        RAISE EXCEPTION 'mode is visible or hidden' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      -- The claim: inserted for a new sign-up, else rehearsed (none: the rehearsed issue below has its own).
      IF p->>'claim' IN ('insert', 'rehearse') THEN
        BEGIN
          INSERT INTO identity.identities (id, status, created_at)
          VALUES (CASE WHEN p->>'claim' = 'insert' THEN subject_identity ELSE throwaway_identity END, 'pending', now_at);
          INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at, created_at)
          VALUES (CASE WHEN p->>'claim' = 'insert' THEN subject_login ELSE throwaway_login END,
                  CASE WHEN p->>'claim' = 'insert' THEN subject_identity ELSE throwaway_identity END,
                  p->>'identifier_kind', p->>'identifier_value', NULL, now_at);
          IF p->>'claim' = 'rehearse' THEN
            RAISE EXCEPTION USING ERRCODE = 'SPR00';
          END IF;
        EXCEPTION WHEN SQLSTATE 'SPR00' THEN NULL;
        END;
      END IF;
      -- The destination's budget is spent first, whether or not there is a subject to issue for.
${budget}      IF wait_seconds IS NOT NULL THEN
        outcome := 'rate_limited';
      ELSIF subject_identity IS NOT NULL THEN
        BEGIN
          challenge_id := identity.issue_challenge_for(p, subject_identity, subject_login, false);
          RETURN jsonb_build_object('outcome', 'issued', 'challenge_id', challenge_id);
        EXCEPTION
          WHEN SQLSTATE 'SPR01' OR SQLSTATE 'SPR02' THEN
            outcome := SQLERRM;
          WHEN OTHERS THEN
            outcome := 'failed';
            failure := SQLSTATE;
        END;
      END IF;
      -- The rehearsed issue: a throw-away claim and its challenge, rolled back.
      BEGIN
        INSERT INTO identity.identities (id, status, created_at) VALUES (throwaway_identity, 'pending', now_at);
        INSERT INTO identity.login_identifiers (id, identity_id, kind, value, verified_at, created_at)
        VALUES (throwaway_login, throwaway_identity, p->>'identifier_kind', p->>'identifier_value', NULL, now_at);
        PERFORM identity.issue_challenge_for(p, throwaway_identity, throwaway_login, false);
        RAISE EXCEPTION USING ERRCODE = 'SPR00';
      EXCEPTION
        WHEN SQLSTATE 'SPR00' THEN NULL;
        WHEN OTHERS THEN
          failure := coalesce(failure, 'rehearsal ' || SQLSTATE);
      END;
      -- The rehearsed job's NOTIFY died with its subtransaction: the same notification, so the
      -- workers (and anyone LISTENing) are woken alike, and the commit takes NOTIFY's lock alike.
      PERFORM outbox.notify_delivery_workers();
      RETURN jsonb_build_object('outcome', outcome, 'retry_after_seconds', wait_seconds, 'failure', failure);
    END $$;
`

const TIERS_BUDGET = `      wait_seconds := CASE WHEN p->'destination_budgets' IS NOT NULL THEN platform.spend_budget_tiers(p->'destination_budgets', now_at)
        ELSE platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(p->'destination_buckets') AS k),
          (p->>'destination_max')::integer, (p->>'destination_window_seconds')::integer, now_at, true) END;
`
const SINGLE_BUDGET = `      wait_seconds := platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(p->'destination_buckets') AS k),
        (p->>'destination_max')::integer, (p->>'destination_window_seconds')::integer, now_at, true);
`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE identity.trusted_devices (
      id uuid PRIMARY KEY,
      identity_id uuid NOT NULL REFERENCES identity.identities (id) ON DELETE CASCADE,
      token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
    );
    CREATE INDEX trusted_devices_identity_idx ON identity.trusted_devices (identity_id, expires_at);
    GRANT SELECT, INSERT, DELETE ON identity.trusted_devices TO ${API_ROLE};

    CREATE FUNCTION platform.spend_budget_tiers(p_tiers jsonb, p_now timestamptz) RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      tier jsonb;
      wait_seconds double precision;
    BEGIN
      IF jsonb_typeof(p_tiers) IS DISTINCT FROM 'array' OR jsonb_array_length(p_tiers) = 0 THEN
        RAISE EXCEPTION 'a budget needs at least one tier' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      FOR tier IN SELECT value FROM jsonb_array_elements(p_tiers) LOOP
        wait_seconds := platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(tier->'buckets') AS k),
          (tier->>'max')::integer, (tier->>'window_seconds')::integer, p_now, true);
        IF wait_seconds IS NOT NULL THEN
          RETURN wait_seconds;
        END IF;
      END LOOP;
      RETURN NULL;
    END $$;
    REVOKE ALL ON FUNCTION platform.spend_budget_tiers(jsonb, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.spend_budget_tiers(jsonb, timestamptz) TO ${API_ROLE};
  `)
  await knex.raw(issueChallenge(TIERS_BUDGET))
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(issueChallenge(SINGLE_BUDGET))
  await knex.raw(`
    DROP FUNCTION platform.spend_budget_tiers(jsonb, timestamptz);
    DROP TABLE identity.trusted_devices;
  `)
}
