import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Knex } from 'knex'

/** A Sealpost event as delivered: `webhook-id` is its id, the same on every retry. */
export type SealpostEvent = { id: string; type: string; timestamp: string; data: Record<string, unknown> }

const TOLERANCE_SECONDS = 5 * 60

/**
 * Standard Webhooks verification: HMAC-SHA256 of `{id}.{timestamp}.{body}` under the base64 key
 * after `whsec_`, compared in constant time with each `v1,` signature of the header (a rotation
 * sends two), and a timestamp within five minutes (no replays of old deliveries).
 */
export function verifyDelivery(secret: string, headers: Record<string, string | undefined>, body: string, now = new Date()): SealpostEvent {
  const id = headers['webhook-id']
  const timestamp = headers['webhook-timestamp']
  const signatures = headers['webhook-signature']
  if (!id || !timestamp || !signatures || !/^\d+$/.test(timestamp)) throw new Error('missing webhook headers')
  if (Math.abs(now.getTime() / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) throw new Error('stale webhook timestamp')
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest()
  const matches = signatures.split(' ').some((entry) => {
    const [version, signature = ''] = entry.split(',')
    const given = Buffer.from(signature, 'base64')
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
  })
  if (!matches) throw new Error('bad webhook signature')
  const event = JSON.parse(body) as Omit<SealpostEvent, 'id'>
  return { id, ...event }
}

/**
 * Applies each event exactly once: the inbox row keyed by the event id and the event's effect
 * commit in one transaction, so a retry (same `webhook-id`) finds the row and changes nothing,
 * and a failed effect leaves no row behind for the retry to trip over. Answer 2xx either way.
 *
 *   CREATE TABLE webhook_inbox (event_id uuid PRIMARY KEY, type text NOT NULL, received_at timestamptz NOT NULL DEFAULT now());
 */
export async function receiveOnce(
  db: Knex,
  event: SealpostEvent,
  apply: (trx: Knex.Transaction, event: SealpostEvent) => Promise<void>,
): Promise<'applied' | 'duplicate'> {
  return await db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: unknown[] }>(
      'INSERT INTO webhook_inbox (event_id, type) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING RETURNING event_id',
      [event.id, event.type],
    )
    if (rows.length === 0) return 'duplicate'
    await apply(trx, event)
    return 'applied'
  })
}
