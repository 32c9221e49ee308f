import { createHash, createHmac, timingSafeEqual } from 'node:crypto'

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

const byNameThenValue = ([a, av]: readonly [string, string], [b, bv]: readonly [string, string]) =>
  a === b ? (av < bv ? -1 : av > bv ? 1 : 0) : a < b ? -1 : 1

/**
 * `X-Twilio-Signature` as Twilio computes it (its "Webhooks security" page): the URL it called,
 * followed by every POST parameter's name and value, sorted by name, with no separators;
 * HMAC-SHA1 keyed with the account's auth token (never an API key secret); base64.
 */
export function twilioSignature(authToken: string, url: string, params: readonly (readonly [string, string])[]): string {
  const signed = [...params].sort(byNameThenValue).reduce((text, [name, value]) => text + name + value, url)
  return createHmac('sha1', authToken).update(signed, 'utf8').digest('base64')
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest()

/** Whether `signature` is Twilio's for this URL and these parameters (compared in constant time). */
export function twilioSignatureValid(
  authToken: string,
  url: string,
  params: readonly (readonly [string, string])[],
  signature: string | undefined,
): boolean {
  if (!signature) return false
  return timingSafeEqual(digest(twilioSignature(authToken, url, params)), digest(signature))
}
