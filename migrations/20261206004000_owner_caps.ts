import type { Knex } from 'knex'

/**
 * The send caps seen from the owner's side (docs/security.md "Caps from the owner's side").
 *
 * - `send_windows.scope` gains a class letter: `o` for owner-asked sends (a message to an identifier
 *   somebody verified: a person proved it is theirs), `c` for courier and hook sends; a scope
 *   without one counts what a stranger can aim at any number, as every row did before. The CHECK
 *   is widened, never narrowed: the previous release keeps writing and reading the scopes it knows.
 * - `send_windows.cap`: the cap the counter was last reserved under, so the web can show its use.
 *   The previous release leaves it NULL.
 * - `outbox.message_askers`: who asked for each message, for the worker (which reads no identifier
 *   table): `courier` (an API key or hook sent it), `owner` (its destination is a verified login
 *   identifier), else `stranger`. Ids and classes only.
 * - `outbox.send_cap_use` and `outbox.send_conversion`: counts for /metrics and the console, no
 *   row, id or number: prefixes cut to four digits as the log lines show them (no session needed,
 *   as `outbox.gauge_summary`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE outbox.send_windows DROP CONSTRAINT send_windows_scope_check;
    ALTER TABLE outbox.send_windows ADD CONSTRAINT send_windows_scope_check CHECK (scope ~ '^[oc]{0,1}([0-9]{0,3}|p[0-9]{7})$');
    ALTER TABLE outbox.send_windows ADD COLUMN cap integer CHECK (cap >= 0);

    CREATE FUNCTION outbox.message_askers(p_ids uuid[]) RETURNS TABLE (message_id uuid, asked text)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT m.id,
             CASE WHEN m.api_key_id IS NOT NULL THEN 'courier'
                  WHEN EXISTS (SELECT FROM identity.login_identifiers li
                                WHERE li.kind = CASE m.channel WHEN 'email' THEN 'email' ELSE 'phone' END
                                  AND li.value = m.destination AND li.verified_at IS NOT NULL) THEN 'owner'
                  ELSE 'stranger' END
        FROM outbox.security_outbox_messages m
       WHERE m.id = ANY (p_ids)
    $$;
    REVOKE ALL ON FUNCTION outbox.message_askers(uuid[]) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.message_askers(uuid[]) TO sealpost_worker;

    CREATE FUNCTION outbox.send_cap_use(p_window_start timestamptz)
      RETURNS TABLE (channel text, scope_kind text, shown_scope text, asked text, sent integer, cap integer)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT w.channel,
             CASE WHEN w.base = '' THEN 'channel' WHEN w.base LIKE 'p%' THEN 'prefix' ELSE 'country' END,
             CASE WHEN w.base LIKE 'p%' THEN substr(w.base, 2, 4) ELSE w.base END,
             CASE w.class WHEN 'o' THEN 'owner' WHEN 'c' THEN 'courier' ELSE 'stranger' END,
             max(w.sent), max(w.cap)
        FROM (SELECT s.channel, substring(s.scope FROM '^[oc]{0,1}') AS class, regexp_replace(s.scope, '^[oc]', '') AS base, s.sent, s.cap
                FROM outbox.send_windows s
               WHERE s.window_start = p_window_start) w
       GROUP BY 1, 2, 3, 4
    $$;
    REVOKE ALL ON FUNCTION outbox.send_cap_use(timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.send_cap_use(timestamptz) TO sealpost_api;

    -- Codes sent since p_since (by the channel of the attempt that published them) and how many of
    -- them a person typed in: a confirmed code proves somebody received it; a pump's never are.
    CREATE FUNCTION outbox.send_conversion(p_since timestamptz)
      RETURNS TABLE (channel text, prefix text, sent integer, converted integer)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      SELECT coalesce(a.channel, m.channel),
             CASE WHEN m.channel = 'email' THEN '' ELSE substr(m.destination, 2, 4) END,
             count(*)::integer,
             (count(*) FILTER (WHERE c.consumed_at IS NOT NULL))::integer
        FROM outbox.security_outbox_messages m
        JOIN identity.challenges c ON c.id = m.challenge_id
        LEFT JOIN LATERAL (SELECT t.channel FROM outbox.security_outbox_attempts t
                            WHERE t.message_id = m.id AND t.outcome = 'published' ORDER BY t.attempt_no DESC LIMIT 1) a ON true
       WHERE m.state = 'published' AND m.published_at >= p_since
       GROUP BY 1, 2
    $$;
    REVOKE ALL ON FUNCTION outbox.send_conversion(timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION outbox.send_conversion(timestamptz) TO sealpost_api;
  `)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION outbox.send_conversion(timestamptz);
    DROP FUNCTION outbox.send_cap_use(timestamptz);
    DROP FUNCTION outbox.message_askers(uuid[]);
    DELETE FROM outbox.send_windows WHERE scope ~ '^[oc]';
    ALTER TABLE outbox.send_windows DROP COLUMN cap;
    ALTER TABLE outbox.send_windows DROP CONSTRAINT send_windows_scope_check;
    ALTER TABLE outbox.send_windows ADD CONSTRAINT send_windows_scope_check CHECK (scope ~ '^([0-9]{0,3}|p[0-9]{7})$');
  `)
}
