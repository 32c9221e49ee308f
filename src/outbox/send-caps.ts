import type { Channel } from './constants.ts'
import { PHONE_CHANNELS } from './destination.ts'
import { callingCodeOf, numberPrefix, smsAllowedFor } from './phone-numbers.ts'

/**
 * The fleet-wide ceiling on what we send ("a global guard on sending"; docs/delivery.md
 * "Send caps"): per channel and per phone country calling code, per clock hour. Every per-client
 * and per-destination budget is passed by a pump spread over thousands of networks and addresses;
 * only a ceiling on the sends themselves bounds the bill and keeps the sender account in good
 * standing. A cap never loses a message or spends an attempt: what it holds back waits for the next
 * hour (or expires unsent, as any late code does). A cap holds what strangers can aim at any
 * number; owners' own codes are counted against it and shown, never held (`CapScope.bounded`).
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
  /** COURIER_CAP_SHARE: the percent of each cap courier and hook sends have to themselves; undefined = they count with strangers'. */
  courierShare?: number
}

export const NO_SEND_CAPS: SendCaps = Object.freeze({ perChannel: Object.freeze({}), perCountry: Object.freeze({}) })

/** The clock hour `now` falls in: caps count per fixed hour (one counter row each, see send-windows-sql.ts). */
export function sendWindow(now: Date): { start: Date; end: Date } {
  const start = Math.floor(now.getTime() / 3_600_000) * 3_600_000
  return { start: new Date(start), end: new Date(start + 3_600_000) }
}

/**
 * Who asked for a message, as the web knew it when it wrote it (`security_outbox_messages.asked`;
 * docs/security.md "Caps from the owner's side"): `owner` for what only the person behind an account
 * asks for itself (a recovery to the identity's verified identifier, a step-up, a notice of a change
 * they made), `stranger` for what anyone can aim at any identifier (a sign-up, whatever it finds; a
 * new sign-in method; an invitation). The same request gets the same asker whether or not an
 * account exists, so no counter's fullness tells a stranger that it does.
 */
export type Asker = 'owner' | 'stranger'

/** The class a message counts in: its asker's, or `courier` when an API key or a hook sent it (`outbox.message_askers`). */
export type Asked = Asker | 'courier'

/** The kinds of cap, in the order a message asks them for room. */
export const CAP_KINDS = Object.freeze(['prefix', 'country', 'channel'] as const)
export type CapKind = (typeof CAP_KINDS)[number]

/**
 * One counter a message counts on: its kind, the class it counts for, and `scope`, the counter's
 * key in send-windows-sql.ts — the class letter (none for strangers, `o` owners, `c` courier) before
 * the channel's '' , the calling code or `p` and the prefix's seven digits. A `bounded` counter holds
 * what does not fit under `cap`; an unbounded one (owners') only counts, and `cap` is what its use
 * is compared against (the report, the OWNER SENDS PAST CAP warning).
 */
export type CapScope = { channel: Channel; kind: CapKind; asked: Asked; scope: string; cap: number; bounded: boolean }

const CLASS_LETTER: Readonly<Record<Asked, string>> = Object.freeze({ stranger: '', owner: 'o', courier: 'c' })

/** The configured cap of a kind a message counts against, and its scope without the class, if any. */
function baseScopeOf(caps: SendCaps, kind: CapKind, channel: Channel, destination: string): { scope: string; cap: number } | undefined {
  if (kind === 'channel') {
    const cap = caps.perChannel[channel]
    return cap === undefined ? undefined : { scope: '', cap }
  }
  if (kind === 'country') {
    if (!PHONE_CHANNELS.has(channel)) return undefined
    // A number we cannot read a code from counts under `*` (scope '0': no calling code starts with 0).
    const code = callingCodeOf(destination) ?? '0'
    const cap = caps.perCountry[code] ?? caps.perCountry['*']
    return cap === undefined ? undefined : { scope: code, cap }
  }
  // Only SMS has prefix caps: its per-message price and premium ranges are what a pump earns from;
  // a WhatsApp template is billed per conversation to a number WhatsApp knows. A number without a
  // prefix (not E.164) counts under `p0000000`: no prefix starts with 0.
  if (channel !== 'sms' || caps.smsPerPrefix === undefined) return undefined
  return { scope: `p${numberPrefix(destination) ?? '0000000'}`, cap: caps.smsPerPrefix }
}

/**
 * What of a configured cap a class may send an hour. Owners are never held: their counter of their
 * own is compared with the whole cap, for the operator. Courier and hook sends count with
 * strangers', or, with COURIER_CAP_SHARE, in a share of their own that the strangers' counter no
 * longer has.
 */
export function classCap(caps: Pick<SendCaps, 'courierShare'>, cap: number, asked: Asked): number {
  if (asked === 'owner' || caps.courierShare === undefined) return cap
  const courier = Math.floor((cap * caps.courierShare) / 100)
  return asked === 'courier' ? courier : cap - courier
}

/** The counter of a kind a message counts against, for the class that asked for it; undefined when no cap of that kind applies. */
export function capScopeOf(
  caps: SendCaps,
  kind: CapKind,
  message: { channel: Channel; destination: string },
  asked: Asked,
): CapScope | undefined {
  const base = baseScopeOf(caps, kind, message.channel, message.destination)
  if (!base) return undefined
  const counted: Asked = asked === 'courier' && caps.courierShare === undefined ? 'stranger' : asked
  return {
    channel: message.channel,
    kind,
    asked: counted,
    scope: `${CLASS_LETTER[counted]}${base.scope}`,
    cap: classCap(caps, base.cap, counted),
    // A stranger can fill any counter, and an owner's code must get through it; an owner's codes are
    // bounded per destination and per identity by the web's budgets instead (docs/security.md).
    bounded: counted !== 'owner',
  }
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

/** Whether this count took an unbounded counter (owners') past its cap: true for exactly one statement per scope and hour, fleet-wide. */
export function crossedCap(cap: number, sentBefore: number, sentAfter: number): boolean {
  return sentBefore <= cap && sentAfter > cap
}

export const sendCapsConfigured = (caps: SendCaps | undefined): caps is SendCaps =>
  caps !== undefined &&
  (Object.keys(caps.perChannel).length > 0 || Object.keys(caps.perCountry).length > 0 || caps.smsPerPrefix !== undefined)

/** The caps from configuration: SEND_CAP_PER_HOUR (the SMS hourly cap is its `sms` entry) and PHONE_CAP_PER_COUNTRY_PER_HOUR as they were. */
export function sendCapsFrom(config: {
  SEND_CAP_PER_HOUR?: Partial<Record<Channel, number>>
  PHONE_CAP_PER_COUNTRY_PER_HOUR?: Record<string, number>
  SMS_PREFIX_HOURLY_CAP?: number
  SMS_ALLOWED_COUNTRIES?: readonly string[]
  COURIER_CAP_SHARE?: number
}): SendCaps {
  return {
    perChannel: { ...config.SEND_CAP_PER_HOUR },
    perCountry: config.PHONE_CAP_PER_COUNTRY_PER_HOUR ?? {},
    ...(config.SMS_PREFIX_HOURLY_CAP !== undefined ? { smsPerPrefix: config.SMS_PREFIX_HOURLY_CAP } : {}),
    ...(config.SMS_ALLOWED_COUNTRIES ? { smsCountries: config.SMS_ALLOWED_COUNTRIES } : {}),
    ...(config.COURIER_CAP_SHARE !== undefined ? { courierShare: config.COURIER_CAP_SHARE } : {}),
  }
}
