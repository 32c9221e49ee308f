import { CHANNELS, type Channel } from './constants.ts'

/**
 * The fleet-wide ceiling on what we send (issue 27, "a global guard on sending"; README
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

/** The channels whose destinations are E.164 phone numbers. */
export const PHONE_CHANNELS: ReadonlySet<Channel> = new Set<Channel>(['whatsapp'])

/**
 * E.164 country calling codes are prefix-free: the assigned one- and two-digit codes are these, and
 * every other code is three digits (ITU-T E.164 Annex; libphonenumber's table agrees), so this
 * small table is all the lookup needs.
 */
const ONE_DIGIT = new Set(['1', '7'])
const TWO_DIGIT = new Set(
  '20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 60 61 62 63 64 65 66 81 82 84 86 90 91 92 93 94 95 98'.split(
    ' ',
  ),
)

/** The country calling code of an E.164 number (`+447700900123` → `44`); undefined when it is not one. */
export function callingCode(e164: string): string | undefined {
  const digits = /^\+?([1-9]\d{3,14})$/.exec(e164.trim())?.[1]
  if (!digits) return undefined
  if (ONE_DIGIT.has(digits.slice(0, 1))) return digits.slice(0, 1)
  if (TWO_DIGIT.has(digits.slice(0, 2))) return digits.slice(0, 2)
  return digits.slice(0, 3)
}

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

/** `name:count,…` into a map; `keyOk` judges each name. Pure, for config/schema.ts. */
function parseCounts(text: string, keyOk: (key: string) => boolean, expected: string): Record<string, number> {
  const counts: Record<string, number> = {}
  if (text.trim() === '') return counts
  for (const part of text.split(',')) {
    const match = /^\s*([^:\s]+)\s*:\s*(\d+)\s*$/.exec(part)
    if (!match || !keyOk(match[1]!) || match[1]! in counts) throw new Error(`expected a comma-separated list like ${expected}`)
    counts[match[1]!] = Number(match[2])
  }
  return counts
}

/** SEND_CAP_PER_HOUR: `email:20000,whatsapp:2000` (empty: no cap). */
export function parseChannelCaps(text: string): Partial<Record<Channel, number>> {
  return parseCounts(text, (key) => (CHANNELS as readonly string[]).includes(key), 'email:20000,whatsapp:2000 (channels: email, whatsapp)')
}

/** PHONE_CAP_PER_COUNTRY_PER_HOUR: `44:500,1:1000,*:200` (calling codes, `*` for every other; empty: no cap). */
export function parseCountryCaps(text: string): Record<string, number> {
  return parseCounts(
    text,
    (key) => key === '*' || callingCode(`+${key}0000000`) === key,
    '44:500,1:1000,*:200 (country calling codes, * for the rest)',
  )
}
