import { getCountries, getCountryCallingCode } from 'libphonenumber-js/max'

/**
 * The send caps' settings as text (config/schema.ts reads them; src/outbox/send-caps.ts enforces
 * them): pure parsers. Which calling codes exist is libphonenumber's table, the one the worker reads
 * a number's code with (src/outbox/phone-numbers.ts `callingCodeOf`).
 */

/** The channels a cap may name: `CHANNELS` of src/outbox/constants.ts, which this layer may not import (a test keeps them equal). */
export const CAP_CHANNELS = ['email', 'whatsapp', 'sms'] as const
type CapChannel = (typeof CAP_CHANNELS)[number]

/**
 * The calling codes a cap may name: those libphonenumber assigns to a country. The international
 * non-geographic ones (+800, +882…) count under `*`.
 */
const COUNTRY_CALLING_CODES: ReadonlySet<string> = new Set(getCountries().map((country) => getCountryCallingCode(country)))

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
export function parseChannelCaps(text: string): Partial<Record<CapChannel, number>> {
  return parseCounts(
    text,
    (key) => (CAP_CHANNELS as readonly string[]).includes(key),
    'email:20000,whatsapp:2000,sms:500 (channels: email, whatsapp, sms)',
  )
}

/**
 * SMS_HOURLY_CAP set the `sms` channel's cap a second way, beside SEND_CAP_PER_HOUR's `sms:` entry
 * (the smaller won). No release read it (0.2.0 had no SMS channel), so it is retired, not
 * kept as an alias: one variable per cap, and one set from a build that read it stops the process
 * with the line to write instead (a ConfigError names variables, never values), rather than
 * leaving the SMS bill uncapped.
 */
export const SMS_HOURLY_CAP_RETIRED =
  "is no longer read: the sms channel's hourly cap is the sms entry of SEND_CAP_PER_HOUR (SEND_CAP_PER_HOUR=sms:<the same count>, beside its other channels); set that and unset SMS_HOURLY_CAP"

/** PHONE_CAP_PER_COUNTRY_PER_HOUR: `44:500,1:1000,*:200` (calling codes, `*` for every other; empty: no cap). */
export function parseCountryCaps(text: string): Record<string, number> {
  return parseCounts(
    text,
    (key) => key === '*' || COUNTRY_CALLING_CODES.has(key),
    '44:500,1:1000,*:200 (country calling codes, * for the rest)',
  )
}
