import type { Knex } from 'knex'
import type { Asked, CapScope } from './send-caps.ts'

const WINDOWS = 'outbox.send_windows'

/** What one reservation decided: how many of the sends asked for fit, whether this was the hour's first refusal, and the hour's count after it. */
export type Reservation = { granted: number; firstHold: boolean; sent: number }

// The two counting statements: a bounded scope takes what fits under the cap, an unbounded one counts everything.
const RESERVE = `INSERT INTO ${WINDOWS} AS w (channel, scope, window_start, sent, granted, first_hold, held_at, cap)
     VALUES (:channel, :scope, :windowStart, LEAST(:wanted::int, :cap::int), LEAST(:wanted::int, :cap::int), :wanted::int > :cap::int,
             CASE WHEN :wanted::int > :cap::int THEN :now::timestamptz END, :cap::int)
     ON CONFLICT (channel, scope, window_start) DO UPDATE SET
       cap = :cap::int,
       sent = LEAST(w.sent + :wanted::int, GREATEST(w.sent, :cap::int)),
       granted = LEAST(w.sent + :wanted::int, GREATEST(w.sent, :cap::int)) - w.sent,
       first_hold = w.held_at IS NULL AND w.sent + :wanted::int > :cap::int,
       held_at = COALESCE(w.held_at, CASE WHEN w.sent + :wanted::int > :cap::int THEN :now::timestamptz END)
     RETURNING w.granted, w.first_hold, w.sent, (w.xmax = 0) AS inserted`

const COUNT = `INSERT INTO ${WINDOWS} AS w (channel, scope, window_start, sent, granted, first_hold, cap)
     VALUES (:channel, :scope, :windowStart, :wanted::int, :wanted::int, false, :cap::int)
     ON CONFLICT (channel, scope, window_start) DO UPDATE SET
       cap = :cap::int, sent = w.sent + :wanted::int, granted = :wanted::int, first_hold = false
     RETURNING w.granted, w.first_hold, w.sent, (w.xmax = 0) AS inserted`

/**
 * Takes up to `wanted` sends from the hour's counter of `scope`, in one statement under the row's
 * lock (fleet-wide exact, no transaction, no count over attempts): `sent` grows by what fits under
 * the cap and `granted` says how much that was. `first_hold` is true for the one statement of the
 * hour that first found the counter too small (the fleet logs the hold once). An unbounded scope
 * (owners') grants everything and only counts. When this opened the hour's row, the scope's older
 * rows go.
 */
export async function reserveSends(db: Knex, scope: CapScope, windowStart: Date, wanted: number, now: Date): Promise<Reservation> {
  const { rows } = await db.raw<{ rows: { granted: number; first_hold: boolean; sent: number; inserted: boolean }[] }>(
    scope.bounded ? RESERVE : COUNT,
    { channel: scope.channel, scope: scope.scope, windowStart, wanted, cap: scope.cap, now },
  )
  const row = rows[0]!
  if (row.inserted)
    await db(WINDOWS)
      .where({ channel: scope.channel, scope: scope.scope })
      .andWhere('window_start', '<', new Date(windowStart.getTime() - 3_600_000))
      .delete()
  return { granted: row.granted, firstHold: row.first_hold, sent: row.sent }
}

/**
 * Who asked for each message (`outbox.message_askers`, migrations 20261206004000 and
 * 20261206009000): what the web wrote on the message, ids and classes only. A message it does not
 * name (gone meanwhile) counts as a stranger's.
 */
export async function messageAskers(db: Knex, ids: readonly string[]): Promise<Map<string, Asked>> {
  if (ids.length === 0) return new Map()
  const { rows } = await db.raw<{ rows: { message_id: string; asked: Asked }[] }>('SELECT * FROM outbox.message_askers(?::uuid[])', [
    ids as string[],
  ])
  return new Map(rows.map((row) => [row.message_id, row.asked]))
}
