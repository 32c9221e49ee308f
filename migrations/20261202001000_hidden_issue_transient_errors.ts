import type { Knex } from 'knex'

/**
 * A 202 means committed (docs/security.md "Hidden paths and transient errors").
 *
 * `identity.issue_challenge` in `hidden` mode hides the existence-dependent failures of the real
 * issue (a resend too soon, a refusal, a row a constraint refuses) and of its rehearsal behind the
 * caller's ordinary answer. Its catch-alls also swallowed the errors that say nothing about the
 * account — a deadlock, a serialization failure, a lock or statement timeout, a lost connection —
 * so a sign-up was answered 202 with nothing enqueued. Those are re-raised now, from the real issue
 * and from the rehearsal alike (a known identifier's issue and an unknown one's rehearsal fail the
 * same way), and the web retries the request in a new transaction or answers 503
 * (src/db/transient.ts holds the same list). Everything else is the previous body
 * (20261202000400_owner_budgets), byte for byte; `down` restores it.
 */

const TIERS_BUDGET = `      wait_seconds := CASE WHEN p->'destination_budgets' IS NOT NULL THEN platform.spend_budget_tiers(p->'destination_budgets', now_at)
        ELSE platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(p->'destination_buckets') AS k),
          (p->>'destination_max')::integer, (p->>'destination_window_seconds')::integer, now_at, true) END;
`

// The SQLSTATEs src/db/transient.ts calls transient: 40001 serialization_failure, 40P01
// deadlock_detected, 55P03 lock_not_available, 57014 query_canceled (statement_timeout), 57P01-57P04
// (the server shutting down or the database gone), and the classes 08 (connection exception) and
// 53 (insufficient resources). WHEN OTHERS never catches 57014 anyway.
const RERAISE_TRANSIENT = `          WHEN SQLSTATE '40001' OR SQLSTATE '40P01' OR SQLSTATE '55P03' OR SQLSTATE '57014'
            OR SQLSTATE '57P01' OR SQLSTATE '57P02' OR SQLSTATE '57P03' OR SQLSTATE '57P04'
            OR connection_exception OR insufficient_resources THEN
            RAISE;
`

const issueChallenge = (transient: string) => `
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
${TIERS_BUDGET}      IF wait_seconds IS NOT NULL THEN
        outcome := 'rate_limited';
      ELSIF subject_identity IS NOT NULL THEN
        BEGIN
          challenge_id := identity.issue_challenge_for(p, subject_identity, subject_login, false);
          RETURN jsonb_build_object('outcome', 'issued', 'challenge_id', challenge_id);
        EXCEPTION
          WHEN SQLSTATE 'SPR01' OR SQLSTATE 'SPR02' THEN
            outcome := SQLERRM;
${transient}          WHEN OTHERS THEN
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
${transient}        WHEN OTHERS THEN
          failure := coalesce(failure, 'rehearsal ' || SQLSTATE);
      END;
      -- The rehearsed job's NOTIFY died with its subtransaction: the same notification, so the
      -- workers (and anyone LISTENing) are woken alike, and the commit takes NOTIFY's lock alike.
      PERFORM outbox.notify_delivery_workers();
      RETURN jsonb_build_object('outcome', outcome, 'retry_after_seconds', wait_seconds, 'failure', failure);
    END $$;
`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(issueChallenge(RERAISE_TRANSIENT))
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(issueChallenge(''))
}
