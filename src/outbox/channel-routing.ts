import type { Channel } from './constants.ts'
import { PHONE_CHANNEL_ORDER, PHONE_CHANNELS } from './destination.ts'

/**
 * Which channel carries a message: the one rule the web's identity flows, the courier API, the
 * hooks and the worker all ask (docs/delivery.md "Phone channels"). PHONE_CHANNELS is an
 * allow-list in order: a phone channel it does not list never carries a code, whatever the fleet
 * registers meanwhile; a sender's scope (a courier key's channels, stored on the message as its
 * `carriers`) binds the fallback too.
 */

/**
 * The channels the worker fleet registered, as the web reads them (src/outbox/channel-directory.ts).
 * `registered` is false while no worker has ever registered against the database (a first boot).
 */
export type FleetChannels = { has(channel: Channel): boolean; readonly registered?: boolean }

/** What routing reads: PHONE_CHANNELS (unset: WhatsApp, then SMS) and the fleet's channels. */
export type ChannelRouting = { phoneChannels?: readonly Channel[]; channels: FleetChannels }

/** The phone channels a code may go out on, in order: PHONE_CHANNELS, or WhatsApp then SMS when it is unset. */
export function listedPhoneChannels(phoneChannels: readonly Channel[] | undefined): readonly Channel[] {
  return phoneChannels ?? PHONE_CHANNEL_ORDER
}

/**
 * Whether a new message may be enqueued on `channel` now: a phone channel only when listed, and
 * then (like email) only when the fleet has it. Until a worker first registers, the deployment's
 * own settings answer instead (an outbox accepts while its workers are away): email, and the phone
 * channels PHONE_CHANNELS names (none while it is unset: which the fleet will have is unknown).
 */
export function offersChannel(routing: ChannelRouting, channel: Channel): boolean {
  const phone = PHONE_CHANNELS.has(channel)
  if (phone && !listedPhoneChannels(routing.phoneChannels).includes(channel)) return false
  if (routing.channels.registered === false) return !phone || (routing.phoneChannels?.includes(channel) ?? false)
  return routing.channels.has(channel)
}

/** `offersChannel` as a set, for the checks that ask about several channels (`phoneRefusal`). */
export function offeredChannels(routing: ChannelRouting): { has(channel: Channel): boolean } {
  return { has: (channel) => offersChannel(routing, channel) }
}

/**
 * The channel a new message to an identifier of this kind is enqueued on: email, or the first
 * listed phone channel on offer, within `scope` when the sender has one (a courier key's channels).
 * Undefined: none is on offer, and the caller refuses (`channel_unavailable`), never picking an
 * unlisted channel. The same for every identifier of a kind, account or not.
 */
export function enqueueChannel(routing: ChannelRouting, kind: 'email' | 'phone', scope?: readonly Channel[]): Channel | undefined {
  const candidates: readonly Channel[] = kind === 'email' ? ['email'] : listedPhoneChannels(routing.phoneChannels)
  return candidates.find((channel) => (scope === undefined || scope.includes(channel)) && offersChannel(routing, channel))
}

/**
 * The phone channels a sender's scope lets its message go out on, stored with the message
 * (`carriers`): undefined when the scope takes every phone channel (no binding to store).
 */
export function carriersOf(scope: readonly Channel[]): Channel[] | undefined {
  const phone = PHONE_CHANNEL_ORDER.filter((channel) => scope.includes(channel))
  return phone.length === PHONE_CHANNEL_ORDER.length ? undefined : phone
}

/**
 * The channels a queued message may go out on, in order (the worker's routing): email for email;
 * for a phone message its own channel when listed, then the listed phone channels after it; one
 * on a channel no longer listed goes on the listed ones, never its own. Never outside the
 * message's `carriers`, never one it proved `unreachable` for this recipient. The envelope still
 * binds the message's own channel and number: only the carrier changes.
 */
export function carryingChannels(
  phoneChannels: readonly Channel[] | undefined,
  message: { channel: Channel; carriers?: readonly Channel[] | null },
  unreachable: ReadonlySet<Channel> = new Set(),
): Channel[] {
  if (!PHONE_CHANNELS.has(message.channel)) return [message.channel]
  const listed = listedPhoneChannels(phoneChannels)
  const at = listed.indexOf(message.channel)
  const route = at >= 0 ? listed.slice(at) : listed
  return route.filter((channel) => (message.carriers == null || message.carriers.includes(channel)) && !unreachable.has(channel))
}

/**
 * Where a published phone code goes when its channel proved it cannot reach the number (the
 * asynchronous fallback, src/identity/phone-fallback.ts): the next listed phone channel on offer
 * after the failed one.
 */
export function nextPhoneChannel(routing: ChannelRouting, failed: Channel): Channel | undefined {
  const listed = listedPhoneChannels(routing.phoneChannels)
  const at = listed.indexOf(failed)
  const later = at >= 0 ? listed.slice(at + 1) : listed.filter((channel) => channel !== failed)
  return later.find((channel) => offersChannel(routing, channel))
}
