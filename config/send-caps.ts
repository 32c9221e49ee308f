/**
 * The send caps' settings as text (config/schema.ts reads them; src/outbox/send-caps.ts enforces
 * them): pure parsers, and the calling-code table they and the worker share.
 */

/** The channels a cap may name: `CHANNELS` of src/outbox/constants.ts, which this layer may not import (a test keeps them equal). */
export const CAP_CHANNELS = ['email', 'whatsapp', 'sms'] as const
type CapChannel = (typeof CAP_CHANNELS)[number]

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
    'email:20000,whatsapp:2000 (channels: email, whatsapp)',
  )
}

/** PHONE_CAP_PER_COUNTRY_PER_HOUR: `44:500,1:1000,*:200` (calling codes, `*` for every other; empty: no cap). */
export function parseCountryCaps(text: string): Record<string, number> {
  return parseCounts(
    text,
    (key) => key === '*' || callingCode(`+${key}0000000`) === key,
    '44:500,1:1000,*:200 (country calling codes, * for the rest)',
  )
}
