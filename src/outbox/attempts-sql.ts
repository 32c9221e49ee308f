import type { Knex } from 'knex'
import type { AttemptOutcome, Channel, FailureClass } from './constants.ts'

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
  /** The channel it went out on: the provider's, which for a phone message may be a later phone channel than its own. */
  channel?: Channel | null
  /** The failure was about this recipient alone: the provider's failure rate never counts it. */
  recipientOnly?: boolean
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
      channel: attempt.channel ?? null,
      recipient_only: attempt.recipientOnly === true ? true : null,
    })),
  )
}

/**
 * A provider's sliding window as the fleet recorded it (the breaker: docs/delivery.md
 * "The outage hold and failover"): its attempts after `since`, at most the last `limit` of them, read backwards along
 * `attempts_provider_window_idx`; the calls that count (a worker's own error is no call) and the
 * provider-side failures among them (UNAVAILABLE and INDETERMINATE not about one recipient; a
 * REJECTED, a THROTTLED and an answer about one recipient are answers). Sees the caller's own
 * uncommitted attempts.
 */
export async function providerWindowTx(
  trx: Knex.Transaction,
  provider: string,
  window: { since: Date; until: Date; limit: number },
): Promise<{ calls: number; failures: number }> {
  const { rows } = await trx.raw<{ rows: { calls: number; failures: number }[] }>(
    `SELECT count(*)::integer AS calls,
            count(*) FILTER (WHERE w.failure_class IN ('UNAVAILABLE', 'INDETERMINATE') AND w.recipient_only IS NOT TRUE)::integer AS failures
       FROM (SELECT a.failure_class, a.recipient_only FROM outbox.security_outbox_attempts a
              WHERE a.provider = ? AND a.attempted_at > ? AND a.attempted_at <= ?
                AND a.failure_class IS DISTINCT FROM 'unexpected_worker_error'
              ORDER BY a.attempted_at DESC LIMIT ?) w`,
    [provider, window.since, window.until, window.limit],
  )
  return rows[0] ?? { calls: 0, failures: 0 }
}

/**
 * The channels each of these messages proved unable to reach its recipient on (docs/delivery.md
 * "Phone channels"): an attempt that failed REJECTED and was still retried is one that went on to
 * the next phone channel (a plain REJECTED is final), so its channel is never tried again for it.
 */
export async function unreachableChannels(db: Knex, messageIds: readonly string[]): Promise<Map<string, Set<Channel>>> {
  const unreachable = new Map<string, Set<Channel>>()
  if (messageIds.length === 0) return unreachable
  const rows: { message_id: string; channel: Channel }[] = await db('outbox.security_outbox_attempts')
    .select('message_id', 'channel')
    .whereIn('message_id', [...messageIds])
    .where({ outcome: 'retryable_error', failure_class: 'REJECTED' })
    .whereNotNull('channel')
  for (const row of rows) unreachable.set(row.message_id, (unreachable.get(row.message_id) ?? new Set()).add(row.channel))
  return unreachable
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
