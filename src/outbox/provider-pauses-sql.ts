import type { Knex } from 'knex'
import type { Channel } from './constants.ts'

const PAUSES = 'outbox.provider_pauses'

/** Pauses a channel until `until`, never shortening a longer pause already in place. */
export async function pauseChannelTx(trx: Knex.Transaction, channel: Channel, until: Date, now: Date): Promise<void> {
  await trx.raw(
    `INSERT INTO ${PAUSES} (channel, paused_until, updated_at) VALUES (?, ?, ?)
     ON CONFLICT (channel) DO UPDATE SET paused_until = GREATEST(${PAUSES}.paused_until, EXCLUDED.paused_until), updated_at = EXCLUDED.updated_at`,
    [channel, until, now],
  )
}

/** The end of each channel's pause still running at `now`. */
export async function activePausesTx(trx: Knex.Transaction, now: Date): Promise<Map<Channel, Date>> {
  const rows: { channel: Channel; paused_until: Date }[] = await trx(PAUSES).select('channel', 'paused_until').where('paused_until', '>', now)
  return new Map(rows.map((row) => [row.channel, row.paused_until]))
}
