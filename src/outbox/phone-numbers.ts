import { parsePhoneNumberFromString, type NumberType } from 'libphonenumber-js/max'

/**
 * Phone numbers as libphonenumber reads them (docs/delivery.md "Phone numbers"). The `max`
 * metadata, deliberately: the default `min` set cannot tell a mobile from a premium-rate number.
 */

/** Which numbers a code may go to, beside the valid mobiles that always may (config PHONE_ALLOW_*). */
export type PhoneNumberPolicy = {
  allowFixedLine: boolean
  allowVoip: boolean
  /** SMS_ALLOWED_COUNTRIES (ISO 3166 alpha-2); undefined = every country. */
  smsCountries?: readonly string[]
}

export const DEFAULT_PHONE_NUMBER_POLICY: PhoneNumberPolicy = Object.freeze({ allowFixedLine: false, allowVoip: false })

// A `+`, then digits and the separators people type ("+44 (0)7911 123-456"); no letters (vanity
// numbers), no extension, no other script's digits: one spelling per number must be reachable.
const WRITTEN = /^\+[0-9][0-9 ().-]{6,30}$/
// What libphonenumber's E.164 must look like to be stored: the shape the schema always had.
const E164 = /^\+[1-9]\d{7,14}$/

/** A number as written, read: its E.164 spelling, country and type; undefined when it is not a phone number at all. */
export type PhoneReading = { e164: string; callingCode: string; valid: boolean; country?: string; type?: NumberType }

export function readPhoneNumber(written: string): PhoneReading | undefined {
  const text = written.trim()
  if (!WRITTEN.test(text)) return undefined
  const parsed = parsePhoneNumberFromString(text)
  if (!parsed || !E164.test(parsed.number)) return undefined
  const valid = parsed.isValid()
  return {
    e164: parsed.number,
    callingCode: parsed.countryCallingCode,
    valid,
    ...(parsed.country ? { country: parsed.country } : {}),
    ...(valid && parsed.getType() ? { type: parsed.getType()! } : {}),
  }
}

/** The country calling code of a number as libphonenumber reads it (`+447700900123` → `44`); undefined when it reads none. */
export function callingCodeOf(e164: string): string | undefined {
  return readPhoneNumber(e164)?.callingCode
}

/** Types that can receive a code on a phone: FIXED_LINE_OR_MOBILE is where a plan does not tell (e.g. +1). */
const MOBILE_TYPES: ReadonlySet<NumberType> = new Set<NumberType>(['MOBILE', 'FIXED_LINE_OR_MOBILE'])

/**
 * Whether a code may be sent to this number: a valid mobile, or a fixed line or VoIP number where
 * the deployment allows them. Premium-rate, shared-cost, toll-free, UAN, voicemail, pager and
 * personal numbers never (they are what an SMS pump rents); nor a number no plan assigns.
 * Pure: it reads the number and the policy, never the database, so the answer cannot differ
 * between a number that has an account and one that has not.
 */
export function phoneNumberAccepted(reading: PhoneReading, policy: PhoneNumberPolicy): boolean {
  if (!reading.valid || !reading.type) return false
  if (MOBILE_TYPES.has(reading.type)) return true
  if (reading.type === 'FIXED_LINE') return policy.allowFixedLine
  if (reading.type === 'VOIP') return policy.allowVoip
  return false
}

/** Whether SMS may carry a code to this E.164 number (SMS_ALLOWED_COUNTRIES; none listed = every country). */
export function smsAllowedFor(e164: string, countries: readonly string[] | undefined): boolean {
  if (countries === undefined) return true
  const country = readPhoneNumber(e164)?.country
  return country !== undefined && countries.includes(country)
}

/**
 * The number range a send cap per prefix counts (SMS_PREFIX_HOURLY_CAP): the first seven digits of
 * the E.164 number, calling code included (+44 7700 900123 → `4477009`). A pump rents a block of
 * consecutive numbers from one carrier; seven digits is narrower than any country and than most
 * national destination codes, wide enough that a person's own number shares it with 10^4–10^8 others.
 */
export const PREFIX_DIGITS = 7

export function numberPrefix(e164: string): string | undefined {
  const digits = /^\+([1-9]\d{7,14})$/.exec(e164.trim())?.[1]
  return digits?.slice(0, PREFIX_DIGITS)
}
