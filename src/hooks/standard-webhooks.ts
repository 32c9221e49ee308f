import { SIGNING_SECRET_FORM } from '../../config/schema.ts'
import { sameSecret } from '../crypto/constant-time.ts'
import { webhookSignatureEntry } from '../crypto/webhook-signature.ts'

/**
 * Standard Webhooks verification of Supabase Auth's hooks (https://www.standardwebhooks.com):
 * `webhook-signature` holds one or more `v1,<base64 HMAC-SHA256>` entries over
 * `${webhook-id}.${webhook-timestamp}.${raw body}`, keyed with the base64 part of `whsec_<base64>`.
 * The signature itself is the `standardwebhooks` library's (src/crypto/webhook-signature.ts); its
 * own `verify` is not called because it reads the wall clock, where the window here is judged
 * on the injected one.
 */

/** How far `webhook-timestamp` may be from our clock, either way: the specification's recommended 5 minutes. */
export const TIMESTAMP_TOLERANCE_SECONDS = 300

// An id is echoed into logs and keys: printable, bounded (Supabase sends a UUID, Svix `msg_<ksuid>`).
const WEBHOOK_ID = /^[\x21-\x7e]{1,128}$/
const TIMESTAMP = /^\d{1,12}$/

/** The HMAC key of a `v1,whsec_<base64>` secret; null for any other form. */
export function signingKeyOf(secret: string): Buffer | null {
  // The form is config/schema.ts's (`v1,` names the symmetric scheme); SUPABASE_HOOK_SECRET was checked against it at startup.
  return SIGNING_SECRET_FORM.test(secret) ? Buffer.from(secret.slice('v1,whsec_'.length), 'base64') : null
}

/** The three headers as received (absent ones undefined). */
export type WebhookHeaders = { id: string | undefined; timestamp: string | undefined; signature: string | undefined }

/** Why a delivery was refused: each a metric label; none says more to the caller than "refused". */
export type WebhookRefusal = 'missing_signature' | 'stale_timestamp' | 'invalid_signature'

export type WebhookVerdict = { verified: true; webhookId: string } | { verified: false; refusal: WebhookRefusal }

/**
 * Checks a delivery against the key: headers present and well formed, the timestamp within the
 * tolerance of `now`, and at least one `v1` entry equal (in constant time) to the library's
 * signature of the raw body. Entries are split on whitespace and a trailing comma is dropped,
 * because Supabase joins several signatures with ", " (supabase/auth internal/hooks/hookshttp/hookshttp.go).
 */
export function verifyWebhook(key: Buffer, headers: WebhookHeaders, body: Buffer, now: Date): WebhookVerdict {
  const { id, timestamp, signature } = headers
  if (!id || !timestamp || !signature || !WEBHOOK_ID.test(id) || !TIMESTAMP.test(timestamp))
    return { verified: false, refusal: 'missing_signature' }
  if (Math.abs(now.getTime() / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS)
    return { verified: false, refusal: 'stale_timestamp' }
  const expected = webhookSignatureEntry(key, id, Number(timestamp), body)
  const matches = signature.split(/\s+/).some((entry) => sameSecret(entry.replace(/,$/, ''), expected))
  return matches ? { verified: true, webhookId: id } : { verified: false, refusal: 'invalid_signature' }
}
