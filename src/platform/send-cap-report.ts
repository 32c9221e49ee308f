import type { Knex } from 'knex'
import { sendCapUseRows, sendConversionRows } from '../outbox/send-cap-use-sql.ts'
import { sendWindow } from '../outbox/send-caps.ts'

/** The most prefixes a channel's conversion lists (those that sent the most): bounded metric labels and a page that fits. */
export const CONVERSION_PREFIXES_SHOWN = 20

/**
 * How the send caps stand this hour and whether what they let through reached people
 * (docs/operations.md "Runbook: a send cap is reached"): each counter's use by who asked for it
 * (owner, stranger, courier) against its cap, and, over the last hour, the codes sent per channel
 * and per four-digit prefix with the share that was confirmed. A prefix that sends many codes and
 * confirms none is a pump; one whose owners' codes count against a full cap needs a higher cap.
 * Prefixes as the log lines show them: never a number.
 */
export async function sendCapReport(db: Knex, now: Date) {
  const window = sendWindow(now)
  const since = new Date(now.getTime() - 3_600_000)
  const [use, conversion] = await Promise.all([sendCapUseRows(db, window.start), sendConversionRows(db, since)])
  const scopes = use
    .map((row) => ({ channel: row.channel, kind: row.scope_kind, scope: row.shown_scope, asked: row.asked, sent: row.sent, cap: row.cap }))
    .sort((a, b) => a.channel.localeCompare(b.channel) || a.kind.localeCompare(b.kind) || a.scope.localeCompare(b.scope))
  const channels = new Map<string, { sent: number; converted: number }>()
  for (const row of conversion) {
    const total = channels.get(row.channel) ?? { sent: 0, converted: 0 }
    channels.set(row.channel, { sent: total.sent + row.sent, converted: total.converted + row.converted })
  }
  const ratio = (sent: number, converted: number) => (sent === 0 ? null : converted / sent)
  const prefixes = [...channels.keys()].flatMap((channel) =>
    conversion
      .filter((row) => row.channel === channel && row.prefix !== '')
      .sort((a, b) => b.sent - a.sent || a.prefix.localeCompare(b.prefix))
      .slice(0, CONVERSION_PREFIXES_SHOWN)
      .map((row) => ({
        channel,
        prefix: `${row.prefix}•••`,
        sent: row.sent,
        confirmed: row.converted,
        ratio: ratio(row.sent, row.converted),
      })),
  )
  return {
    windowStart: window.start.toISOString(),
    scopes,
    conversionSince: since.toISOString(),
    conversion: [
      ...[...channels].map(([channel, total]) => ({
        channel,
        prefix: null,
        sent: total.sent,
        confirmed: total.converted,
        ratio: ratio(total.sent, total.converted),
      })),
      ...prefixes,
    ],
  }
}

export type SendCapReport = Awaited<ReturnType<typeof sendCapReport>>
