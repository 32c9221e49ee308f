import type { Knex } from 'knex'
import type { ChallengePurpose, Channel } from './constants.ts'

/**
 * The outbox changes the web may make beyond INSERT, each through the one SECURITY DEFINER
 * function that does exactly it (the api role can touch outbox state no other way). Both close
 * messages through `outbox.dead_letter_messages`, as the worker does, at the web's clock (`now`).
 * And the web's INSERT itself, as one call: `outbox.enqueue_message` (SECURITY INVOKER, the web's
 * own grants), the message, its envelope and its job.
 */

/** Closes every unsent message of a challenge: a resend supersedes them, a consumed or dead challenge ends them. */
export async function deadLetterChallengeMessagesTx(
  trx: Knex.Transaction,
  challengeId: string,
  reason: 'superseded_by_resend' | 'challenge_consumed',
  now: Date,
): Promise<void> {
  await trx.raw('SELECT outbox.dead_letter_open_messages(?, ?, ?)', [challengeId, reason, now])
}

/** Closes every unsent message of an invitation: a revoked or accepted invitation sends nothing more. */
export async function deadLetterInvitationMessagesTx(
  trx: Knex.Transaction,
  invitationId: string,
  reason: 'invitation_revoked' | 'invitation_accepted',
  now: Date,
): Promise<void> {
  await trx.raw('SELECT outbox.dead_letter_invitation_messages(?, ?, ?)', [invitationId, reason, now])
}

/** A message as `outbox.enqueue_message` takes it (`sealMessage` builds one): hex for bytes, ISO for times. */
export type SealedMessage = {
  message_id: string
  job_id: string
  purpose: string
  challenge_id: string | null
  invitation_id: string | null
  /** Only on a courier message: the previous release's `outbox.enqueue_message` never sees the field. */
  api_key_id?: string
  /** Who asked (`owner`, `stranger`), or `asked_like`: the message whose asker it takes (migration 20261206009000). */
  asked?: string
  asked_like?: string
  /** Only on a message whose sender is bound to some phone channels: the previous release's function never sees the field. */
  carriers?: string[]
  channel: string
  destination: string
  locale: string
  destination_hmac: string
  expires_at: string
  envelope: string
  /** The delivery job as `boss.send` would write it: the parameter of pg-boss's INSERT (`outbox.insert_delivery_job`). */
  job_json: string
}

/** The message, its envelope and its pg-boss job: one round trip (SECURITY INVOKER: the api role's own grants). */
export async function enqueueMessageTx(trx: Knex.Transaction, message: SealedMessage): Promise<void> {
  await trx.raw('SELECT outbox.enqueue_message(?::jsonb)', [JSON.stringify(message)])
}

/** What `outbox.phone_fallback_candidate` found: a refusal code, or the live challenge to send a new code for. */
export type PhoneFallbackCandidate =
  | { refusal: string }
  | { refusal: null; purpose: ChallengePurpose; challenge_id: string; destination: string; locale: string; expires_at: Date }

/**
 * Checks, under the challenge's lock held to COMMIT, that a published phone code whose channel
 * cannot reach its number may go again on `channels.next` (migration 20261202002300): the destination
 * returned is the challenge's own identifier, never the message row's.
 */
export async function phoneFallbackCandidateTx(
  trx: Knex.Transaction,
  messageId: string,
  channels: { failed: Channel; next: Channel },
  now: Date,
): Promise<PhoneFallbackCandidate> {
  const { rows } = await trx.raw<{ rows: PhoneFallbackCandidate[] }>('SELECT * FROM outbox.phone_fallback_candidate(?, ?, ?, ?)', [
    messageId,
    channels.failed,
    channels.next,
    now,
  ])
  return rows[0]!
}
