import type { Knex } from 'knex'

/**
 * The outbox changes the web may make beyond INSERT, each through the one SECURITY DEFINER
 * function that does exactly it (the api role can touch outbox state no other way). Both close
 * messages through `outbox.dead_letter_messages`, as the worker does, at the web's clock (`now`).
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
