import { DomainError } from '../identity/errors.ts'

/**
 * Organization names are mailed by the official sender inside invitations, so a name must not be
 * able to carry a link, an address or forged lines (a phishing link under our sender). The check
 * runs on the NFKC form (full-width `：／．` become `:/.`) and on a skeleton in which the look-alikes
 * NFKC leaves alone (ideographic full stop, ratio sign, division slash, Arabic-Indic zero…) are
 * folded to ASCII and combining marks dropped, so `evil。com`, `https∶∕∕x`, `evil[.]com`,
 * `evil dot com` and `www.x` are all refused, and so is a phone number to call back (call-back phishing). The NFKC
 * form is what is stored and mailed.
 */
export const ORGANIZATION_NAME_MAX = 100

export type NameRefusal = 'length' | 'invisible_or_control' | 'email_address' | 'link' | 'phone_number'

/** `422 invalid_organization_name`: the name could carry a link, an address or forged lines. */
export class InvalidOrganizationNameError extends DomainError {
  readonly reason: NameRefusal
  constructor(reason: NameRefusal) {
    super(
      'invalid_organization_name',
      'An organization name must be plain text: no links, web or e-mail addresses, phone numbers, line breaks or invisible characters.',
    )
    this.reason = reason
  }
}

// Controls, format characters (bidi controls, zero-width space/joiners, BOM, word joiner), line and
// paragraph separators, private use, surrogates, unassigned code points; spaces other than U+0020;
// and letters or symbols that render as nothing (Hangul fillers, Braille blank, Khmer inherent vowels).
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cs}\p{Cn}\u115F\u1160\u2800\u3164\uFFA0]|\u17B4|\u17B5|(?! )\p{Zs}/u
// Variation selectors and the combining grapheme joiner render as nothing either.
const INVISIBLE_MARKS = /\u034F|\p{Variation_Selector}/u

const LOOKALIKES: [RegExp, string][] = [
  [/[\u00B7\u0589\u0660\u06D4\u06F0\u0701\u0702\u1362\u2022\u2024\u2027\u2219\u22C5\u2E3C\u3002\u30FB\uA4F8\uFF61]/gu, '.'],
  [/[\u02D0\u02F8\u05C3\u16EC\u205A\u2236\uA789\uA4FD\uFE13\uFE55]/gu, ':'],
  [/[\u2044\u2215\u2571\u27CB\u29F8\u3033]/gu, '/'],
  [/[\u2216\u29F5\u29F9]/gu, '\\'],
]

const SCHEMES =
  'https?|s?ftps?|mailto|javascript|vbscript|data|file|blob|tel|sms|smsto|callto|skype|whatsapp|wa|tg|intent|market|itms(?:-apps)?|ws|wss|irc|news|git|ssh|telnet'
const TLDS =
  'com|net|org|io|co|info|biz|app|dev|xyz|me|ru|cn|top|site|online|link|click|help|support|security|login|page|live|ly|gl|to|us|uk|de|eu|fr|es|in|br|au|ca'
const LINK_PATTERNS: RegExp[] = [
  new RegExp(`(?:^|[^\\p{L}\\p{N}])(?:${SCHEMES})\\s*:`, 'u'), // a known scheme, spaced or not
  /[\p{L}\p{N}+.-]\s*:\s*[/\\]/u, // any scheme-like prefix before a slash: x:/, x:\
  /\/\s*\/|\\\s*\\/u, // // or \\ (protocol-relative, UNC)
  /(?:^|[^\p{L}\p{N}])www\s*(?:\.|[[({<]\s*(?:\.|dot)\s*[\])}>])/u, // www. with or without a scheme
  /[\p{L}\p{N}-]\.(?:\p{L}{2,}|xn--)/u, // label.tld, as a mail client would auto-link it
  /\bxn--/u, // punycode
  /\d{1,3}(?:\s*\.\s*\d{1,3}){3}/u, // a dotted IPv4 address
  /[\p{L}\p{N}]\s*[[({<]\s*(?:\.|dot|punkt|point)\s*[\])}>]\s*[\p{L}\p{N}]/u, // evil[.]com, evil(dot)com
  new RegExp(`[\\p{L}\\p{N}](?:\\s*\\.\\s*|\\s+dot\\s+)(?:${TLDS})(?![\\p{L}\\p{N}])`, 'u'), // evil . com, evil dot com
]

// Call-back phishing ("Billing: call 0800 555 0199" under our sender): seven or more digits of any
// script, once spaces, dots, dashes and parentheses between them are ignored (a leading + is no digit).
const PHONE_NUMBER = /\p{Nd}(?:[\s.()\p{Pd}]*\p{Nd}){6,}/u

/** The ASCII-folded, lower-case form the link patterns are matched against. */
function skeleton(name: string): string {
  let folded = name.toLowerCase().normalize('NFKD')
  for (const [pattern, ascii] of LOOKALIKES) folded = folded.replace(pattern, ascii)
  // A dot below or above a letter is left out on purpose: it would refuse every Vietnamese name.
  return folded.replace(/\p{M}/gu, '')
}

/** Why `raw` is refused as an organization name, or undefined with the form to store. */
export function checkOrganizationName(raw: string): { ok: true; name: string } | { ok: false; reason: NameRefusal } {
  const nfkc = raw.normalize('NFKC')
  if (INVISIBLE.test(nfkc.replace(/^ +| +$/g, '')) || INVISIBLE_MARKS.test(nfkc)) return { ok: false, reason: 'invisible_or_control' }
  const name = nfkc.trim().replace(/ {2,}/g, ' ')
  if (name.length < 1 || name.length > ORGANIZATION_NAME_MAX) return { ok: false, reason: 'length' }
  const folded = skeleton(name)
  if (folded.includes('@') || /\p{L}\s*\(\s*at\s*\)\s*\p{L}/u.test(folded)) return { ok: false, reason: 'email_address' }
  if (LINK_PATTERNS.some((pattern) => pattern.test(folded))) return { ok: false, reason: 'link' }
  // The NFKC form too: the skeleton folds an Arabic-Indic zero to a dot.
  if (PHONE_NUMBER.test(name) || PHONE_NUMBER.test(folded)) return { ok: false, reason: 'phone_number' }
  return { ok: true, name }
}

/** The name to store, or `InvalidOrganizationNameError`. */
export function organizationNameOrThrow(raw: string): string {
  const checked = checkOrganizationName(raw)
  if (!checked.ok) throw new InvalidOrganizationNameError(checked.reason)
  return checked.name
}
