import type { Knex } from 'knex'
import { describeError, type Logger } from '../logging/logger.ts'
import { availableChannels } from './channel-registrations-sql.ts'
import type { Channel } from './constants.ts'

/**
 * The channels the worker fleet can deliver on, as the web sees them (docs/delivery.md "Channels");
 * `registered` false while no worker has ever registered (src/outbox/channel-routing.ts then
 * answers from the web's own settings).
 */
export type ChannelDirectory = {
  has(channel: Channel): boolean
  readonly registered: boolean
  /** Reads the database now; on failure keeps the last answer and logs by error name. */
  refresh(): Promise<void>
  stop(): void
}

/** How often the web re-reads the available channels: a reconfigured fleet shows within seconds of its rule. */
export const CHANNEL_REFRESH_MS = 5_000

/**
 * Loads the available channels once (a failure here stops the web's startup: it must not guess),
 * then refreshes them in the background; until a worker first registers, `registered` is false and
 * the routing answers from the web's own settings (src/outbox/channel-routing.ts). A refresh that fails keeps the last answer: a database
 * blip does not turn every phone sign-up into a refusal.
 */
export async function loadChannelDirectory(deps: { db: Knex; logger: Logger; refreshMs?: number }): Promise<ChannelDirectory> {
  let current: Channel[] | null = await availableChannels(deps.db)
  if (current === null)
    deps.logger.info('no worker has registered yet: until one does, the web offers email and the phone channels PHONE_CHANNELS names')
  let running: Promise<void> | undefined
  const read = async () => {
    try {
      const next = await availableChannels(deps.db)
      if (current === null && next !== null)
        deps.logger.info('the first worker registered: the web offers the channels the fleet has', { channels: next })
      current = next
    } catch (error) {
      deps.logger.warn('available channels not refreshed; keeping the last answer', describeError(error))
    } finally {
      running = undefined
    }
  }
  // One read at a time: a slow database is not asked again before it answered.
  const refresh = (): Promise<void> => (running ??= read())
  const timer = setInterval(() => void refresh(), deps.refreshMs ?? CHANNEL_REFRESH_MS)
  timer.unref()
  return {
    has: (channel) => current?.includes(channel) ?? false,
    get registered() {
      return current !== null
    },
    refresh,
    stop: () => clearInterval(timer),
  }
}
