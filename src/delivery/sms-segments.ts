/**
 * How many SMS segments a text costs (3GPP TS 23.038, formerly GSM 03.38): a text written only in
 * the GSM 7-bit default alphabet goes as GSM-7 (160 septets in one segment; 153 per part once it
 * is split, the user data header takes the rest), where a character of the extension table costs
 * two septets (escape + character). Anything else sends the whole text as UCS-2: 70 UTF-16 code
 * units in one segment, 67 per part. Carriers bill per segment, and a split code message can arrive
 * out of order, so the SMS templates are held to one segment by a test (docs/deliverability.md).
 */
export type SmsEncoding = 'GSM-7' | 'UCS-2'
export type SmsSegments = { encoding: SmsEncoding; units: number; segments: number }

// The default alphabet's 128 positions in table order (0x1B, the escape, left out), then the
// extension table reached through the escape: form feed, ^ { } \ [ ~ ] | and the euro sign.
const GSM7_BASIC = new Set(
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
)
const GSM7_EXTENSION = new Set('\f^{}\\[~]|€')

const LIMITS = { 'GSM-7': { single: 160, part: 153 }, 'UCS-2': { single: 70, part: 67 } } as const

export function smsSegments(text: string): SmsSegments {
  const gsm: number[] = []
  for (const char of text) {
    if (GSM7_BASIC.has(char)) gsm.push(1)
    else if (GSM7_EXTENSION.has(char)) gsm.push(2)
    else
      return pack(
        'UCS-2',
        [...text].map((char) => char.length),
      )
  }
  return pack('GSM-7', gsm)
}

// A split message's parts never cut an escape pair or a surrogate pair in two (a phone would show
// a wrong character at the seam), so a part may carry one unit fewer than its limit.
function pack(encoding: SmsEncoding, costs: number[]): SmsSegments {
  const { single, part } = LIMITS[encoding]
  const units = costs.reduce((sum, cost) => sum + cost, 0)
  if (units <= single) return { encoding, units, segments: 1 }
  let segments = 1
  let used = 0
  for (const cost of costs) {
    if (used + cost > part) {
      segments += 1
      used = 0
    }
    used += cost
  }
  return { encoding, units, segments }
}
