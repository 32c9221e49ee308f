import type { Knex } from 'knex'

/** A courier message as `outbox.courier_message` gives it (timestamps as JSON text), or undefined when the key did not send it. */
export type CourierMessageJson = {
  messageId: string
  purpose: string
  channel: string
  maskedDestination: string
  state: string
  attemptCount: number
  createdAt: string
  expiresAt: string
  publishedAt: string | null
  deadLetteredAt: string | null
  deadLetterReason: string | null
  attempts: { attemptNo: number; outcome: string; failureClass: string | null; attemptedAt: string }[]
}

/** One message of one key, destination masked, through the SECURITY DEFINER function (the web reads no message row). */
export async function courierMessageOfKey(db: Knex, apiKeyId: string, messageId: string): Promise<CourierMessageJson | undefined> {
  const { rows } = await db.raw<{ rows: { message: CourierMessageJson | null }[] }>('SELECT outbox.courier_message(?, ?) AS message', [
    apiKeyId,
    messageId,
  ])
  return rows[0]?.message ?? undefined
}
