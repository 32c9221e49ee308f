import { createHmac, randomBytes } from 'node:crypto'

/**
 * Standard Webhooks signatures (docs/events.md "Verifying a delivery"): a secret is `whsec_` and
 * the base64 of its key; a signature is `v1,` and the base64 HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{body}`; several are space-separated (a rotation's overlap).
 */
const PREFIX = 'whsec_'

/** A fresh signing secret: 32 random bytes as `whsec_<base64>`. */
export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString('base64')
}

/** The HMAC key of a `whsec_` secret. */
export function webhookSecretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64')
}

/** The `webhook-signature` header value: one `v1,` signature per secret, space-separated. */
export function signWebhook(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets
    .map((secret) => `v1,${createHmac('sha256', webhookSecretKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`)
    .join(' ')
}
