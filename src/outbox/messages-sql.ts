import type { Knex } from 'knex'
import type { Channel, DeadLetterReason, FailureClass, MessageState, Purpose } from './constants.ts'
import type { Asker } from './send-caps.ts'

const MESSAGES = 'outbox.security_outbox_messages'

/** A message row as the worker sees it (database row, not a domain object). */
export type MessageRow = {
  id: string
  purpose: Purpose
  channel: Channel
  destination: string
  locale: string
  invitation_id: string | null
  state: MessageState
  attempt_count: number
  lease_job_id: string | null
  lease_retry_count: number | null
  expires_at: Date
  created_at: Date
  /** The phone channels its sender allowed it to go out on (a courier key's scope); null: any of PHONE_CHANNELS. */
  carriers?: Channel[] | null
}

export type NewMessage = {
  id: string
  /** The pg-boss job that will deliver it (the purge cancels it if the message expires first). */
  jobId: string
  purpose: Purpose
  challengeId?: string
  invitationId?: string
  /** The courier API key that sent it (src/platform/courier.ts); no challenge or invitation then. */
  apiKeyId?: string
  /** Who asked for it, as the flow that writes it knows (docs/security.md "Caps from the owner's side"); a courier message names none. */
  asked?: Asker
  /** Instead of `asked`: the message whose asker this one has (the same challenge's code again: a phone fallback, a staff reissue). */
  askedLike?: string
  channel: Channel
  destination: string
  locale: string
  /** HMAC of the canonical destination (destination.ts): what the suppression list matches. */
  destinationHmac: Buffer
  expiresAt: Date
  /** The phone channels it may go out on when its sender is bound to some (src/outbox/channel-routing.ts `carriersOf`). */
  carriers?: Channel[]
}

/** The pg-boss job attempt a lease belongs to. */
export type Lease = { jobId: string; retryCount: number }

export async function lockMessageTx(trx: Knex.Transaction, id: string): Promise<MessageRow | undefined> {
  return (await lockMessagesTx(trx, [id]))[0]
}

/** The select list of a `MessageRow`: every reader of one (lock, claim) selects exactly these. */
export const MESSAGE_COLUMNS = [
  'id',
  'purpose',
  'channel',
  'destination',
  'locale',
  'invitation_id',
  'state',
  'attempt_count',
  'lease_job_id',
  'lease_retry_count',
  'expires_at',
  'created_at',
  'carriers',
] as const satisfies readonly (keyof MessageRow)[]

/** Locks several messages, always in id order, so two batches that overlap cannot deadlock. */
export async function lockMessagesTx(trx: Knex.Transaction, ids: readonly string[]): Promise<MessageRow[]> {
  return await trx(MESSAGES)
    .select(...MESSAGE_COLUMNS)
    .whereIn('id', [...new Set(ids)])
    .orderBy('id')
    .forUpdate()
}

export function isLeasedBy(row: MessageRow, lease: Lease): boolean {
  return row.state === 'leased' && row.lease_job_id === lease.jobId && row.lease_retry_count === lease.retryCount
}

/** Leases each message to its job attempt, one statement for the batch. */
export async function leaseMessagesTx(
  trx: Knex.Transaction,
  leases: readonly { messageId: string; lease: Lease }[],
  now: Date,
): Promise<void> {
  if (leases.length === 0) return
  await trx.raw(
    `UPDATE ${MESSAGES} AS m
        SET state = 'leased', lease_job_id = v.job_id, lease_retry_count = v.retry_count, leased_at = ?
       FROM unnest(?::uuid[], ?::uuid[], ?::integer[]) AS v (id, job_id, retry_count)
      WHERE m.id = v.id`,
    [now, leases.map((entry) => entry.messageId), leases.map((entry) => entry.lease.jobId), leases.map((entry) => entry.lease.retryCount)],
  )
}

/** Publishes messages whose (first successful) attempt was just inserted: attempt_count follows. */
export async function publishMessagesTx(trx: Knex.Transaction, ids: readonly string[], now: Date): Promise<void> {
  if (ids.length === 0) return
  await trx(MESSAGES)
    .whereIn('id', ids)
    .update({ state: 'published', published_at: now, attempt_count: trx.raw('attempt_count + 1') })
}

/** Back to pending for a later job; `attempted` when an attempt row was just inserted for it. */
export async function releaseMessageForRetryTx(
  trx: Knex.Transaction,
  id: string,
  availableAt: Date,
  nextJobId: string,
  attempted: boolean,
): Promise<void> {
  await trx(MESSAGES)
    .where({ id })
    .update({
      ...(attempted ? { attempt_count: trx.raw('attempt_count + 1') } : {}),
      state: 'pending',
      available_at: availableAt,
      job_id: nextJobId,
      lease_job_id: null,
      lease_retry_count: null,
      leased_at: null,
    })
}

/** Why a message is dead-lettered, as its dead-letter row records it; `attempted` when an attempt row was just inserted for it. */
export type DeadLetter = { messageId: string; reason: DeadLetterReason; lastFailureClass: FailureClass | null; attempted?: boolean }

/** Dead-letters a message: final state, its dead-letter row, and its ciphertext gone. */
export async function deadLetterMessageTx(
  trx: Knex.Transaction,
  id: string,
  reason: DeadLetterReason,
  lastFailureClass: FailureClass | null,
  now: Date,
): Promise<void> {
  await deadLetterMessagesTx(trx, [{ messageId: id, reason, lastFailureClass }], now)
}

/**
 * Dead-letters several messages at once through `outbox.dead_letter_messages`, the one
 * implementation the web's functions share: final state at `now`, the dead-letter row, the
 * ciphertext gone. The caller has locked them open; one found final already throws (and rolls back).
 */
export async function deadLetterMessagesTx(trx: Knex.Transaction, letters: readonly DeadLetter[], now: Date): Promise<void> {
  if (letters.length === 0) return
  const { rows } = await trx.raw<{ rows: { closed: string[] }[] }>(
    'SELECT outbox.dead_letter_messages(?::uuid[], ?::text[], ?::text[], ?::boolean[], ?) AS closed',
    [
      letters.map((letter) => letter.messageId),
      letters.map((letter) => letter.reason),
      // NULL elements travel as NULL; knex's binding type has no room for them.
      letters.map((letter) => letter.lastFailureClass) as string[],
      letters.map((letter) => letter.attempted ?? false),
      now,
    ],
  )
  const closed = rows[0]?.closed.length ?? 0
  if (closed !== letters.length) throw new Error(`dead-lettered ${closed} of ${letters.length} messages: the others were not open`)
}
