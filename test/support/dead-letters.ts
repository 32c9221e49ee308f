import { randomBytes } from 'node:crypto'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import type { FailureClass } from '../../src/outbox/constants.ts'
import { createVerifiedIdentity } from './helpers.ts'

/**
 * A password-recovery code message that failed `failures.length` times and was dead-lettered, as the
 * worker would have left it: leased for each attempt, attempts numbered in order, the ciphertext
 * gone. Its challenge is still open, so staff may reissue it. Written as the owner.
 */
export async function insertFailedDeadLetter(
  owner: Knex,
  input: {
    destination: string
    failures: FailureClass[]
    reason?: string
    at?: Date
    /** The challenge's own identifier, when the row names another destination (a tampered or foreign row). */
    identifier?: string
    /** The destination's HMAC, for a row a suppression can name (the enqueue computes it; this insert does not). */
    destinationHmac?: Buffer
    /** The provider of each attempt, in order (none named when omitted). */
    providers?: string[]
  },
): Promise<{ messageId: string; challengeId: string; identityId: string }> {
  const channel = input.destination.startsWith('+') ? 'whatsapp' : 'email'
  const { identityId, loginIdentifierId } = await createVerifiedIdentity(owner, input.identifier ?? input.destination)
  const challengeId = uuidv7()
  const messageId = uuidv7()
  const at = input.at ?? new Date()
  const expiresAt = new Date(Date.now() + 600_000)
  await owner.transaction(async (trx) => {
    await trx('identity.challenges').insert({
      id: challengeId,
      purpose: 'password_recovery',
      identity_id: identityId,
      login_identifier_id: loginIdentifierId,
      code_hash: randomBytes(32),
      expires_at: expiresAt,
    })
    await trx('outbox.security_outbox_messages').insert({
      id: messageId,
      purpose: 'password_recovery',
      challenge_id: challengeId,
      channel,
      destination: input.destination,
      destination_hmac: input.destinationHmac ?? null,
      expires_at: expiresAt,
      state: 'leased',
      lease_job_id: uuidv7(),
      lease_retry_count: 0,
      leased_at: at,
    })
    for (const [index, failureClass] of input.failures.entries()) {
      const last = index === input.failures.length - 1
      await trx('outbox.security_outbox_attempts').insert({
        message_id: messageId,
        attempt_no: index + 1,
        outcome: last ? 'failed' : 'retryable_error',
        failure_class: failureClass,
        provider: input.providers?.[index] ?? null,
        retry_after_at: failureClass === 'THROTTLED' ? new Date(at.getTime() + 30_000) : null,
        duration_ms: 40 + index * 15,
        attempted_at: new Date(at.getTime() - (input.failures.length - index) * 60_000),
      })
      await trx('outbox.security_outbox_messages')
        .where({ id: messageId })
        .update({ attempt_count: index + 1 })
    }
    await trx('outbox.security_outbox_messages')
      .where({ id: messageId })
      .update({ state: 'dead_lettered', dead_lettered_at: at, lease_job_id: null, lease_retry_count: null })
    await trx('outbox.security_outbox_dead_letters').insert({
      message_id: messageId,
      reason: input.reason ?? 'retries_exhausted',
      last_failure_class: input.failures.at(-1) ?? null,
      dead_lettered_at: at,
    })
  })
  return { messageId, challengeId, identityId }
}
