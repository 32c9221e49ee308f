import { callingCode } from '../../config/send-caps.ts'
import type { Channel } from './constants.ts'
import { PHONE_CHANNELS } from './destination.ts'
import { numberPrefix, smsAllowedFor } from './phone-numbers.ts'

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
  /** SMS sends per number prefix (`numberPrefix`) per hour (SMS_PREFIX_HOURLY_CAP): a pump's rented block fills its own. */
  smsPerPrefix?: number
  /** SMS_ALLOWED_COUNTRIES: the countries SMS may carry a code to; undefined = every country. */
  smsCountries?: readonly string[]
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

/**
 * The prefix cap an SMS counts against, if any (scope `p` and the prefix's seven digits). Only SMS:
 * its per-message price and premium ranges are what a pump earns from; a WhatsApp template is
 * billed per conversation to a number WhatsApp knows.
 */
export function prefixScopeOf(caps: SendCaps, channel: Channel, destination: string): CapScope | undefined {
  if (channel !== 'sms' || caps.smsPerPrefix === undefined) return undefined
  // A number without a prefix (not E.164) counts under `p0000000`: no prefix starts with 0.
  return { channel, scope: `p${numberPrefix(destination) ?? '0000000'}`, cap: caps.smsPerPrefix }
}

/** Whether this message may not go by SMS: its channel is `sms` and its number is outside SMS_ALLOWED_COUNTRIES. */
export function smsCountryRefused(caps: SendCaps | undefined, channel: Channel, destination: string): boolean {
  return channel === 'sms' && !smsAllowedFor(destination, caps?.smsCountries)
}

/** Of a cap's counter after a reservation: the share used at which the fleet is warned (SEND CAP NEAR). */
export const NEAR_CAP_RATIO = 0.8

/** Whether this reservation took the counter across NEAR_CAP_RATIO: true for exactly one statement per scope and hour, fleet-wide. */
export function crossedNearCap(cap: number, sentBefore: number, sentAfter: number): boolean {
  const near = Math.ceil(cap * NEAR_CAP_RATIO)
  return cap > 0 && sentBefore < near && sentAfter >= near
}

/** The channel cap a message counts against, if any. */
export function channelScopeOf(caps: SendCaps, channel: Channel): CapScope | undefined {
  const cap = caps.perChannel[channel]
  return cap === undefined ? undefined : { channel, scope: '', cap }
}

export const sendCapsConfigured = (caps: SendCaps | undefined): caps is SendCaps =>
  caps !== undefined &&
  (Object.keys(caps.perChannel).length > 0 || Object.keys(caps.perCountry).length > 0 || caps.smsPerPrefix !== undefined)

/**
 * The caps from configuration: SEND_CAP_PER_HOUR and PHONE_CAP_PER_COUNTRY_PER_HOUR as they were;
 * SMS_HOURLY_CAP is the `sms` channel's cap (beside an `sms:` entry of SEND_CAP_PER_HOUR, the smaller).
 */
export function sendCapsFrom(config: {
  SEND_CAP_PER_HOUR?: Partial<Record<Channel, number>>
  PHONE_CAP_PER_COUNTRY_PER_HOUR?: Record<string, number>
  SMS_HOURLY_CAP?: number
  SMS_PREFIX_HOURLY_CAP?: number
  SMS_ALLOWED_COUNTRIES?: readonly string[]
}): SendCaps {
  const perChannel = { ...config.SEND_CAP_PER_HOUR }
  if (config.SMS_HOURLY_CAP !== undefined) perChannel.sms = Math.min(perChannel.sms ?? Infinity, config.SMS_HOURLY_CAP)
  return {
    perChannel,
    perCountry: config.PHONE_CAP_PER_COUNTRY_PER_HOUR ?? {},
    ...(config.SMS_PREFIX_HOURLY_CAP !== undefined ? { smsPerPrefix: config.SMS_PREFIX_HOURLY_CAP } : {}),
    ...(config.SMS_ALLOWED_COUNTRIES ? { smsCountries: config.SMS_ALLOWED_COUNTRIES } : {}),
  }
}
