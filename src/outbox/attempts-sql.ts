import type { Knex } from 'knex'
import type { AttemptOutcome, FailureClass } from './constants.ts'

export type NewAttempt = {
  messageId: string
  attemptNo: number
  outcome: AttemptOutcome
  failureClass: FailureClass | null
  providerMessageId: string | null
  retryAfterAt: Date | null
  durationMs: number
  attemptedAt: Date
  /** The provider it went to (null: none was named, as by an earlier release). */
  provider?: string | null
}

/**
 * Appends attempts. The database checks each number and the lease at once; the writer's own
 * state-changing UPDATE sets attempt_count, and COMMIT checks that it matches (20261130001100).
 */
export async function insertAttemptsTx(trx: Knex.Transaction, attempts: readonly NewAttempt[]): Promise<void> {
  if (attempts.length === 0) return
  await trx('outbox.security_outbox_attempts').insert(
    attempts.map((attempt) => ({
      message_id: attempt.messageId,
      attempt_no: attempt.attemptNo,
      outcome: attempt.outcome,
      failure_class: attempt.failureClass,
      provider_message_id: attempt.providerMessageId,
      retry_after_at: attempt.retryAfterAt,
      duration_ms: Math.max(0, Math.round(attempt.durationMs)),
      attempted_at: attempt.attemptedAt,
      provider: attempt.provider ?? null,
    })),
  )
}

/**
 * The provider's id of a message's latest published attempt, and the address it went to (the
 * development event tool names it as the bounced or complaining recipient); undefined when unsent.
 */
export async function latestProviderSend(
  db: Knex,
  messageId: string,
): Promise<{ providerMessageId: string; destination: string } | undefined> {
  const attempt = await db('outbox.security_outbox_attempts as a')
    .join('outbox.security_outbox_messages as m', 'm.id', 'a.message_id')
    .where({ 'a.message_id': messageId })
    .whereNotNull('a.provider_message_id')
    .orderBy('a.attempt_no', 'desc')
    .first<{ provider_message_id: string; destination: string } | undefined>('a.provider_message_id', 'm.destination')
  return attempt && { providerMessageId: attempt.provider_message_id, destination: attempt.destination }
}

/** The newest published message to a destination, for the development tools (`npm run dev:message`). */
export async function latestPublishedMessageTo(db: Knex, destination: string): Promise<string | undefined> {
  const row = await db('outbox.security_outbox_messages')
    .where({ destination, state: 'published' })
    .orderBy('id', 'desc')
    .first<{ id: string } | undefined>('id')
  return row?.id
}
