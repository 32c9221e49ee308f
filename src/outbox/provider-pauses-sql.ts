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

/** The end of the channel's pause, if one is still running at `now`. */
export async function activePauseTx(trx: Knex.Transaction, channel: Channel, now: Date): Promise<Date | undefined> {
  const row = await trx(PAUSES).select('paused_until').where({ channel }).andWhere('paused_until', '>', now).first<{ paused_until: Date } | undefined>()
  return row?.paused_until
}
