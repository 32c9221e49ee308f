import { callingCode } from '../../config/send-caps.ts'
import type { Channel } from './constants.ts'
import { PHONE_CHANNELS } from './destination.ts'

/**
 * The fleet-wide ceiling on what we send ("a global guard on sending"; docs/delivery.md
 * "Send caps"): per channel and per phone country calling code, per clock hour. Every per-client
 * and per-destination budget is passed by a pump spread over thousands of networks and addresses;
 * only a ceiling on the sends themselves bounds the bill and keeps the sender account in good
 * standing. A cap never loses a message or spends an attempt: what it holds back waits for the next
 * hour (or expires unsent, as any late code does).
 */
export type SendCaps = {
  /** Sends per channel per hour; a channel not named is not capped. */
  perChannel: Readonly<Partial<Record<Channel, number>>>
  /** Sends per country calling code per hour on the phone channels; `*` caps every code not named. */
  perCountry: Readonly<Record<string, number>>
}

export const NO_SEND_CAPS: SendCaps = Object.freeze({ perChannel: Object.freeze({}), perCountry: Object.freeze({}) })

/** The clock hour `now` falls in: caps count per fixed hour (one counter row each, see send-windows-sql.ts). */
export function sendWindow(now: Date): { start: Date; end: Date } {
  const start = Math.floor(now.getTime() / 3_600_000) * 3_600_000
  return { start: new Date(start), end: new Date(start + 3_600_000) }
}

/** One counter a message must find room in: its channel's (`scope` '') or its country's (`scope` the calling code). */
export type CapScope = { channel: Channel; scope: string; cap: number }

/** The country cap a phone message counts against, if any. */
export function countryScopeOf(caps: SendCaps, channel: Channel, destination: string): CapScope | undefined {
  if (!PHONE_CHANNELS.has(channel)) return undefined
  // A number we cannot read a code from counts under `*` (scope '0': no calling code starts with 0).
  const code = callingCode(destination) ?? '0'
  const cap = caps.perCountry[code] ?? caps.perCountry['*']
  return cap === undefined ? undefined : { channel, scope: code, cap }
}

/** The channel cap a message counts against, if any. */
export function channelScopeOf(caps: SendCaps, channel: Channel): CapScope | undefined {
  const cap = caps.perChannel[channel]
  return cap === undefined ? undefined : { channel, scope: '', cap }
}

export const sendCapsConfigured = (caps: SendCaps | undefined): caps is SendCaps =>
  caps !== undefined && (Object.keys(caps.perChannel).length > 0 || Object.keys(caps.perCountry).length > 0)
