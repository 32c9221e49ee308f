import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'

/**
 * Standard Webhooks signatures (docs/events.md "Verifying a delivery", docs/hooks.md): a secret is
 * `whsec_` and the base64 of its key; a signature is `v1,` and the base64 HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{body}`; several are space-separated (a rotation's overlap).
 * Every signature Sealpost makes or checks, events out and Supabase's hooks in, is computed here by
 * the `standardwebhooks` package, the library Supabase Auth signs with: one implementation.
 */
const PREFIX = 'whsec_'

/** A fresh signing secret: 32 random bytes as `whsec_<base64>`. */
export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString('base64')
}

/** One `v1,<base64>` entry: `key` is a `whsec_` secret, or the raw key bytes. */
export function webhookSignatureEntry(key: string | Buffer, id: string, timestampSeconds: number, body: string | Buffer): string {
  const signer = typeof key === 'string' ? new Webhook(key) : new Webhook(key, { format: 'raw' })
  return signer.sign(id, new Date(timestampSeconds * 1000), body)
}

/** The `webhook-signature` header value: one `v1,` signature per secret, space-separated. */
export function signWebhook(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets.map((secret) => webhookSignatureEntry(secret, id, timestampSeconds, body)).join(' ')
}
