import type { Knex } from 'knex'

/**
 * One rule for a budget of several windows (docs/architecture.md §7 "Budgets"): a request fits when
 * every tier has room, and then spends one hit in each; refused, it spends nothing, and the wait it
 * is told is the longest of the tiers without room (the first moment a retry can fit).
 *
 * The web spent tiers by two rules: `platform.spend_budget_tiers` (20261202000400, the anonymous
 * issue's destination budget) spent them in order and stopped at the first without room, leaving
 * the ones before it spent (a client refused by the ceiling lost its own slice too) and answering
 * that tier's wait; the sign-in, wrong-code and courier budgets checked every tier first and spent
 * all or none, with the longest wait. The second is the rule: the TypeScript copy goes, and every
 * tiered budget is these two functions.
 *
 * - `platform.budget_tiers_wait(tiers, now)`: locks every tier in the order given (each a
 *   `platform.rate_limit_window` without spending) and answers the longest wait, or NULL while
 *   all have room. For the budgets spent only by failures (wrong codes, wrong passwords): checked
 *   first, spent once the failure is known.
 * - `platform.spend_budget_tiers(tiers, now)`: the same check, then one hit under each tier's
 *   current key when all have room (the locks taken by the check are held to the commit).
 *
 * Rolling upgrades: `spend_budget_tiers` keeps its name, signature and grant, so a web still
 * running beside this release calls it through `identity.issue_challenge` unchanged and gets the
 * one rule too; such a web (and 0.1.0's, which has no tiers) spends its other budgets through
 * `platform.rate_limit_window` and `platform.rate_limit_hits`, which this does not touch: both
 * releases count the same rows under the same locks. `budget_tiers_wait` is new and only this
 * release calls it. `down` restores the spend in order and drops it.
 */
const SPEND_IN_ORDER = `
      FOR tier IN SELECT value FROM jsonb_array_elements(p_tiers) LOOP
        wait_seconds := platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(tier->'buckets') AS k),
          (tier->>'max')::integer, (tier->>'window_seconds')::integer, p_now, true);
        IF wait_seconds IS NOT NULL THEN
          RETURN wait_seconds;
        END IF;
      END LOOP;
      RETURN NULL;`

const SPEND_ALL_OR_NONE = `
      wait_seconds := platform.budget_tiers_wait(p_tiers, p_now);
      IF wait_seconds IS NOT NULL THEN
        RETURN wait_seconds;
      END IF;
      INSERT INTO platform.rate_limit_hits (bucket_key, hit_at)
      SELECT decode(t.value->'buckets'->>0, 'hex'), p_now FROM jsonb_array_elements(p_tiers) AS t (value);
      RETURN NULL;`

const spendBudgetTiers = (body: string) => `
    CREATE OR REPLACE FUNCTION platform.spend_budget_tiers(p_tiers jsonb, p_now timestamptz) RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      tier jsonb;
      wait_seconds double precision;
    BEGIN
      IF jsonb_typeof(p_tiers) IS DISTINCT FROM 'array' OR jsonb_array_length(p_tiers) = 0 THEN
        RAISE EXCEPTION 'a budget needs at least one tier' USING ERRCODE = 'invalid_parameter_value';
      END IF;${body}
    END $$;`

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION platform.budget_tiers_wait(p_tiers jsonb, p_now timestamptz) RETURNS double precision
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
      tier jsonb;
      wait_seconds double precision;
    BEGIN
      IF jsonb_typeof(p_tiers) IS DISTINCT FROM 'array' OR jsonb_array_length(p_tiers) = 0 THEN
        RAISE EXCEPTION 'a budget needs at least one tier' USING ERRCODE = 'invalid_parameter_value';
      END IF;
      FOR tier IN SELECT value FROM jsonb_array_elements(p_tiers) LOOP
        -- greatest() skips NULLs: a tier with room does not shorten another's wait.
        wait_seconds := greatest(wait_seconds,
          platform.rate_limit_window(ARRAY(SELECT decode(k, 'hex') FROM jsonb_array_elements_text(tier->'buckets') AS k),
            (tier->>'max')::integer, (tier->>'window_seconds')::integer, p_now, false));
      END LOOP;
      RETURN wait_seconds;
    END $$;
    REVOKE ALL ON FUNCTION platform.budget_tiers_wait(jsonb, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION platform.budget_tiers_wait(jsonb, timestamptz) TO sealpost_api;
    ${spendBudgetTiers(SPEND_ALL_OR_NONE)}
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${spendBudgetTiers(SPEND_IN_ORDER)}
    DROP FUNCTION platform.budget_tiers_wait(jsonb, timestamptz);
  `)
}
