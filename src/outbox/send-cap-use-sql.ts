import type { Knex } from 'knex'
import type { Asked, CapKind } from './send-caps.ts'

/** One send cap counter of this hour as `outbox.send_cap_use` shows it: a prefix cut to four digits (the fullest of them). */
export type CapUseRow = { channel: string; scope_kind: CapKind; shown_scope: string; asked: Asked; sent: number; cap: number | null }

/** Codes published since a time on one channel (and, for a phone channel, the first four digits of the number), and how many were confirmed. */
export type ConversionRow = { channel: string; prefix: string; sent: number; converted: number }

/** The hour's send cap counters (migration 20261206004000): counts only, no number, no row. */
export async function sendCapUseRows(db: Knex, windowStart: Date): Promise<CapUseRow[]> {
  const { rows } = await db.raw<{ rows: CapUseRow[] }>('SELECT * FROM outbox.send_cap_use(?)', [windowStart])
  return rows.map((row) => ({ ...row, sent: Number(row.sent), cap: row.cap === null ? null : Number(row.cap) }))
}

/** Codes published since `since` and how many a person typed in, per channel and four-digit prefix (migration 20261206004000). */
export async function sendConversionRows(db: Knex, since: Date): Promise<ConversionRow[]> {
  const { rows } = await db.raw<{ rows: ConversionRow[] }>('SELECT * FROM outbox.send_conversion(?)', [since])
  return rows.map((row) => ({ ...row, sent: Number(row.sent), converted: Number(row.converted) }))
}
