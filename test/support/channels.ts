import type { Knex } from 'knex'
import { registerDeliveryChannels } from '../../src/outbox/channel-registrations-sql.ts'
import type { Channel } from '../../src/outbox/constants.ts'

/** The worker id a test stack registers its channels under when it starts a web (fixed: re-registering replaces it). */
export const STACK_WORKER_ID = '00000000-0000-4000-8000-0000000c4a77'

/** What a worker with these channels registers (docs/delivery.md "Channels"), through the worker's own statement. */
export async function registerChannelsAsWorker(db: Knex, channels: readonly Channel[], now = new Date(), workerId = STACK_WORKER_ID) {
  const providers = channels.map((channel) => (channel === 'email' ? 'ses' : channel === 'sms' ? 'twilio' : 'wasender'))
  await registerDeliveryChannels(db, { workerId, channels, providers }, now)
}
