import type { Knex } from 'knex'
import { CHANNELS, type Channel } from './constants.ts'

/**
 * Which channels exist, from the one place that knows: the workers (docs/delivery.md "Channels"). A worker
 * registers the channels it has a provider for at startup and heartbeats the same row every
 * minute; the web asks `outbox.available_channels()`, whose rule (the union over the registrations
 * seen within 3 minutes of the newest one) lives in migration 20261202000600.
 */

export type ChannelRegistration = {
  workerId: string
  channels: readonly Channel[]
  /** The provider ids behind those channels (`ses`, `wasender`), for an operator reading the table. */
  providers: readonly string[]
}

/** Registers a worker's channels, or (the same statement) heartbeats them; `started_at` is kept from the first call. */
export async function registerDeliveryChannels(db: Knex, registration: ChannelRegistration, now: Date): Promise<void> {
  await db.raw(
    `INSERT INTO outbox.delivery_channel_registrations AS r (worker_id, channels, providers, started_at, seen_at)
     VALUES (?, ?::text[], ?::text[], ?, ?)
     ON CONFLICT (worker_id) DO UPDATE
       SET channels = excluded.channels, providers = excluded.providers, seen_at = greatest(r.seen_at, excluded.seen_at)`,
    [registration.workerId, [...registration.channels], [...registration.providers], now, now],
  )
}

/**
 * The channels the fleet can deliver on now (api role: through its SECURITY DEFINER function);
 * null while no worker has ever registered against this database (20261206006000).
 */
export async function availableChannels(db: Knex): Promise<Channel[] | null> {
  const { rows } = await db.raw<{ rows: { channels: string[] | null }[] }>('SELECT outbox.available_channels() AS channels')
  const channels = rows[0]?.channels
  if (channels == null) return null
  const known: readonly string[] = CHANNELS
  return channels.filter((channel): channel is Channel => known.includes(channel))
}
