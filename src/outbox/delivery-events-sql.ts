import type { Knex } from 'knex'
import { COMPLAINT_STOPS_PURPOSES, type Channel, type DeliveryEvent, type SuppressionReason } from './constants.ts'

/** One provider event as stored: matched later to a message by the provider's message id. */
export type ProviderEvent = {
  providerMessageId: string
  event: DeliveryEvent
  subtype: string | null
  /** Null when the provider gives no time (an SMS status callback): the event is then dated by the attempt it answers, so a replay is the same row. */
  occurredAt: Date | null
  /** A permanent bounce or a complaint puts the destination on the suppression list, if it is one of `recipients`. */
  suppress: SuppressionReason | null
  /** The addresses the event names as bounced or complaining (SES `bouncedRecipients` / `complainedRecipients`). */
  recipients: readonly string[]
}

/** What storing one provider event did; `purpose` labels the metric; `suppressed`: the destination is (now) on the list. */
export type RecordedEvent =
  { outcome: 'stored' | 'duplicate'; messageId: string; purpose: string; suppressed: boolean } | { outcome: 'unknown_message' }

/**
 * Stores one provider event through the web's only write path, `outbox.record_delivery_event`:
 * matched by the provider's message id on the channel, stored once, and the message's exact
 * destination suppressed when the event says so and `recipientHmacs` (the HMACs of the addresses
 * the event names, under every code-hash key) hold the message's own: an event proves something
 * only about the address it names. Nothing is stored for a provider id no attempt carries.
 */
export async function recordDeliveryEvent(
  db: Knex,
  channel: Channel,
  event: ProviderEvent,
  receivedAt: Date,
  recipientHmacs: readonly Buffer[],
): Promise<RecordedEvent> {
  const { rows } = await db.raw<{
    rows: { outcome: RecordedEvent['outcome']; message_id: string | null; purpose: string | null; suppressed: boolean }[]
  }>('SELECT * FROM outbox.record_delivery_event(?, ?, ?, ?, ?, ?, ?, ?::bytea[])', [
    channel,
    event.providerMessageId,
    event.event,
    event.subtype,
    event.occurredAt,
    receivedAt,
    event.suppress,
    [...recipientHmacs],
  ])
  const row = rows[0]!
  return row.outcome === 'unknown_message'
    ? { outcome: 'unknown_message' }
    : { outcome: row.outcome, messageId: row.message_id!, purpose: row.purpose!, suppressed: row.suppressed }
}

/** Delivery events per purpose and event received since `since` (the backlog answer and the web metrics). */
export async function deliveryEventsSince(db: Knex, since: Date): Promise<{ purpose: string; event: string; count: number }[]> {
  const { rows } = await db.raw<{ rows: { purpose: string; event: string; count: string }[] }>(
    'SELECT * FROM outbox.delivery_events_since(?)',
    [since],
  )
  return rows.map((row) => ({ purpose: row.purpose, event: row.event, count: Number(row.count) }))
}

/**
 * SQL: whether the message row `alias` may not be sent because its exact destination is on the
 * suppression list: a permanent bounce stops everything to it, a complaint only the purposes in
 * COMPLAINT_STOPS_PURPOSES. This check and the common claim's.
 */
export const DESTINATION_SUPPRESSED = (alias: string) =>
  `EXISTS (SELECT FROM outbox.suppressed_destinations s WHERE s.destination_hmac = ${alias}.destination_hmac
            AND (s.reason = 'permanent_bounce' OR ${alias}.purpose IN (${COMPLAINT_STOPS_PURPOSES.map((p) => `'${p}'`).join(', ')})))`

/** Of these claimed messages, the ones whose destination is suppressed (the worker's check before any send). */
export async function suppressedAmong(db: Knex, messageIds: readonly string[]): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set()
  const { rows } = await db.raw<{ rows: { id: string }[] }>(
    `SELECT m.id FROM outbox.security_outbox_messages m
      WHERE m.id = ANY(?::uuid[]) AND ${DESTINATION_SUPPRESSED('m')}`,
    [[...messageIds]],
  )
  return new Set(rows.map((row) => row.id))
}
