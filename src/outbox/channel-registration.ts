import type { Knex } from 'knex'
import { describeError, type Logger } from '../logging/logger.ts'
import { registerDeliveryChannels, type ChannelRegistration } from './channel-registrations-sql.ts'

/** How often a worker says it is still there; the available set's 3-minute window is three of these. */
export const CHANNEL_HEARTBEAT_MS = 60_000

/**
 * A worker's side of "which channels exist" (docs/delivery.md "Channels"): registers at once (the caller
 * awaits it before delivering, so a failure stops startup), then heartbeats every minute. A failed
 * heartbeat is logged by error name and tried again at the next tick: the registration only ages.
 * Stopping does not unregister: a fleet that is down keeps its last known channels.
 */
export async function startChannelRegistration(deps: {
  db: Knex
  registration: ChannelRegistration
  clock: () => Date
  logger: Logger
  heartbeatMs?: number
}): Promise<{ stop: () => void }> {
  await registerDeliveryChannels(deps.db, deps.registration, deps.clock())
  deps.logger.info('delivery channels registered', {
    workerId: deps.registration.workerId,
    channels: deps.registration.channels,
    providers: deps.registration.providers,
  })
  const timer = setInterval(() => {
    registerDeliveryChannels(deps.db, deps.registration, deps.clock()).catch((error: unknown) =>
      deps.logger.warn('delivery channel heartbeat failed; tried again in a minute', describeError(error)),
    )
  }, deps.heartbeatMs ?? CHANNEL_HEARTBEAT_MS)
  timer.unref()
  return { stop: () => clearInterval(timer) }
}
