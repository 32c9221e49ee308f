import { createHmac } from 'node:crypto'
import { sameSecret } from '../../crypto/constant-time.ts'
import { parse, stringify } from 'node:querystring'

/** The route Twilio posts message status callbacks to (src/http/routes/webhooks.ts). */
export const TWILIO_WEBHOOK_PATH = '/webhooks/twilio'

/**
 * The status callback URL a message is sent with, and the one every callback's signature is
 * checked against: built from PUBLIC_BASE_URL, never from a request's Host header (which the
 * caller writes).
 */
export function twilioStatusCallbackUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}${TWILIO_WEBHOOK_PATH}`
}

/**
 * `X-Twilio-Signature` as Twilio computes it (its "Webhooks security" page, and twilio-node's
 * `getExpectedTwilioSignature`): the URL it called, then each POST parameter's name and value by
 * name, a repeated name once per distinct value in order, with no separators; HMAC-SHA1 keyed with
 * the account's auth token (never an API key secret); base64.
 */
export function twilioSignature(authToken: string, url: string, params: readonly (readonly [string, string])[]): string {
  const byName = new Map<string, Set<string>>()
  for (const [name, value] of params) byName.set(name, (byName.get(name) ?? new Set()).add(value))
  const signed = [...byName.keys()]
    .sort()
    .reduce((text, name) => [...byName.get(name)!].sort().reduce((line, value) => line + name + value, text), url)
  return createHmac('sha1', authToken).update(signed, 'utf8').digest('base64')
}

// `scheme://`, then user info, host and port as written: split without normalizing, so the rest keeps the characters Twilio signed.
const AUTHORITY = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)/i

function withPort(url: string, port: 'default' | 'none'): string {
  const match = AUTHORITY.exec(url)
  if (!match) return url
  const [prefix, scheme, authority] = match as unknown as [string, string, string]
  const at = authority.lastIndexOf('@') + 1
  const hostAndPort = authority.slice(at)
  // A colon starts the port only after an IPv6 literal's closing bracket.
  const colon = hostAndPort.indexOf(':', hostAndPort.lastIndexOf(']') + 1)
  const host = colon < 0 ? hostAndPort : hostAndPort.slice(0, colon)
  if (port === 'default' && colon >= 0) return url
  const added = port === 'none' ? '' : scheme.toLowerCase() === 'https://' ? ':443' : ':80'
  return scheme + authority.slice(0, at) + host + added + url.slice(prefix.length)
}

// The query re-encoded as Node's legacy querystring encodes it, for back ends that signed that form.
function withLegacyQuerystring(url: string): string {
  const start = url.indexOf('?')
  return start < 0 || start === url.length - 1 ? url : `${url.slice(0, start)}?${stringify(parse(url.slice(start + 1)))}`
}

/**
 * Every URL Twilio's own validator checks a signature over, in its order (twilio-node
 * src/webhooks/webhooks.ts `validateRequest`): the URL as configured without and with the default
 * port, then as WHATWG URL serializes it, without and with the port, each also with the legacy
 * query string. Twilio's signing is inconsistent about all three (docs/delivery.md "Delivery feedback").
 */
export function twilioSignedUrls(url: string): string[] {
  const normalized = new URL(url).toString()
  const candidates = [withPort(url, 'none'), withPort(url, 'default'), withPort(normalized, 'none'), withPort(normalized, 'default')]
  return [...new Set([...candidates, ...candidates.slice(2).map(withLegacyQuerystring)])]
}

/**
 * Whether `signature` is Twilio's for these parameters over one of the URL variants Twilio's own
 * validator accepts (compared in constant time). `url` is always ours (PUBLIC_BASE_URL), never the
 * request's Host: the variants only forgive Twilio's way of writing that one URL.
 */
export function twilioSignatureValid(
  authToken: string,
  url: string,
  params: readonly (readonly [string, string])[],
  signature: string | undefined,
): boolean {
  if (!signature) return false
  return twilioSignedUrls(url)
    .map((candidate) => sameSecret(signature, twilioSignature(authToken, candidate, params)))
    .includes(true)
}
