import type { Knex } from 'knex'
import { messageHistoryRow } from '../outbox/staff-functions-sql.ts'

type Stamp = string | null

const iso = <T extends Stamp>(value: T): T => (value === null ? value : (new Date(value).toISOString() as T))

/**
 * `GET /platform-admin/security-outbox/messages/:id`: one message, its attempts, its dead letter and its delivery events,
 * through `outbox.message_history`, which checks the staff session from its token hash itself.
 * Undefined when there is no such message.
 */
export async function messageHistory(db: Knex, sessionTokenHash: Buffer, messageId: string) {
  const history = await messageHistoryRow(db, sessionTokenHash, messageId)
  if (!history) return undefined
  const { message, attempts, deadLetter, events } = history
  return {
    message: {
      ...message,
      createdAt: iso(message.createdAt),
      availableAt: iso(message.availableAt),
      publishedAt: iso(message.publishedAt),
      deadLetteredAt: iso(message.deadLetteredAt),
      expiresAt: iso(message.expiresAt),
    },
    attempts: attempts.map((attempt) => ({ ...attempt, retryAfterAt: iso(attempt.retryAfterAt), attemptedAt: iso(attempt.attemptedAt) })),
    deadLetter: deadLetter && { ...deadLetter, deadLetteredAt: iso(deadLetter.deadLetteredAt) },
    events: events.map((event) => ({ ...event, occurredAt: iso(event.occurredAt), receivedAt: iso(event.receivedAt) })),
  }
}
