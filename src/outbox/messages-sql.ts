import type { Knex } from 'knex'
import type { Channel, DeadLetterReason, FailureClass, MessageState, Purpose } from './constants.ts'

const MESSAGES = 'outbox.security_outbox_messages'

/** A message row as the worker sees it (database row, not a domain object). */
export type MessageRow = {
  id: string
  purpose: Purpose
  channel: Channel
  destination: string
  locale: string
  state: MessageState
  attempt_count: number
  lease_job_id: string | null
  lease_retry_count: number | null
  expires_at: Date
  created_at: Date
}

export type NewMessage = {
  id: string
  /** The pg-boss job that will deliver it (the purge cancels it if the message expires first). */
  jobId: string
  purpose: Purpose
  challengeId?: string
  invitationId?: string
  channel: Channel
  destination: string
  locale: string
  expiresAt: Date
}

/** The pg-boss job attempt a lease belongs to. */
export type Lease = { jobId: string; retryCount: number }

export async function insertMessageTx(trx: Knex.Transaction, message: NewMessage): Promise<void> {
  await trx(MESSAGES).insert({
    id: message.id,
    job_id: message.jobId,
    purpose: message.purpose,
    challenge_id: message.challengeId ?? null,
    invitation_id: message.invitationId ?? null,
    channel: message.channel,
    destination: message.destination,
    locale: message.locale,
    expires_at: message.expiresAt,
  })
}

export async function lockMessageTx(trx: Knex.Transaction, id: string): Promise<MessageRow | undefined> {
  return await trx(MESSAGES)
    .select('id', 'purpose', 'channel', 'destination', 'locale', 'state', 'attempt_count',
      'lease_job_id', 'lease_retry_count', 'expires_at', 'created_at')
    .where({ id })
    .forUpdate()
    .first()
}

export function isLeasedBy(row: MessageRow, lease: Lease): boolean {
  return row.state === 'leased' && row.lease_job_id === lease.jobId && row.lease_retry_count === lease.retryCount
}

export async function leaseMessageTx(trx: Knex.Transaction, id: string, lease: Lease, now: Date): Promise<void> {
  await trx(MESSAGES).where({ id }).update({
    state: 'leased',
    lease_job_id: lease.jobId,
    lease_retry_count: lease.retryCount,
    leased_at: now,
  })
}

export async function publishMessageTx(trx: Knex.Transaction, id: string, now: Date): Promise<void> {
  await trx(MESSAGES).where({ id }).update({ state: 'published', published_at: now })
}

export async function releaseMessageForRetryTx(trx: Knex.Transaction, id: string, availableAt: Date, nextJobId: string): Promise<void> {
  await trx(MESSAGES).where({ id }).update({
    state: 'pending',
    available_at: availableAt,
    job_id: nextJobId,
    lease_job_id: null,
    lease_retry_count: null,
    leased_at: null,
  })
}

/** Dead-letters a message: final state, its dead-letter row, and its ciphertext gone. */
export async function deadLetterMessageTx(
  trx: Knex.Transaction,
  id: string,
  reason: DeadLetterReason,
  lastFailureClass: FailureClass | null,
  now: Date,
): Promise<void> {
  await trx(MESSAGES).where({ id }).update({ state: 'dead_lettered', dead_lettered_at: now })
  await trx('outbox.security_outbox_dead_letters').insert({
    message_id: id,
    reason,
    last_failure_class: lastFailureClass,
    dead_lettered_at: now,
  })
  await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
}
