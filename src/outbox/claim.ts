import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { selectEnvelopeTx } from './ciphertexts-sql.ts'
import { deadLetterMessageTx, leaseMessageTx, lockMessageTx, type Lease, type MessageRow } from './messages-sql.ts'
import { activePauseTx } from './provider-pauses-sql.ts'
import { completeJobTx, isJobActiveTx, scheduleNextAttemptTx } from './settle.ts'

export type Claim =
  | { kind: 'claimed'; message: MessageRow; envelope: string }
  | { kind: 'settled'; why: 'missing' | 'final' | 'expired' | 'no_ciphertext' | 'held_by_another_job' | 'channel_paused' }

/**
 * Step 1 of delivery, one short transaction: lock the message, settle the job at once when there
 * is nothing to send (gone, final, expired), otherwise lease it to this job attempt and read the
 * envelope. A message leased under an older attempt of the same job is taken over: pg-boss only
 * hands a job out again once that attempt's lease expired.
 */
export async function claimMessage(db: Knex, boss: PgBoss, messageId: string, lease: Lease, now: Date): Promise<Claim> {
  return await db.transaction(async (trx) => {
    const message = await lockMessageTx(trx, messageId)
    if (!message || message.state === 'published' || message.state === 'dead_lettered') {
      await completeJobTx(trx, boss, lease)
      return { kind: 'settled', why: message ? 'final' : 'missing' }
    }
    if (message.state === 'leased' && message.lease_job_id !== lease.jobId && (await isJobActiveTx(trx, message.lease_job_id))) {
      // Another live job holds this message (OX-W3): it will send; this job is a duplicate.
      await completeJobTx(trx, boss, lease)
      return { kind: 'settled', why: 'held_by_another_job' }
    }
    if (message.expires_at.getTime() <= now.getTime()) {
      await deadLetterMessageTx(trx, messageId, 'challenge_expired', null, now)
      await completeJobTx(trx, boss, lease)
      return { kind: 'settled', why: 'expired' }
    }
    const pausedUntil = await activePauseTx(trx, message.channel, now)
    if (pausedUntil) {
      // The provider asked the fleet to back off: wait it out without spending an attempt,
      // unless the code would be useless by then.
      if (pausedUntil.getTime() >= message.expires_at.getTime()) await deadLetterMessageTx(trx, messageId, 'challenge_expired', 'THROTTLED', now)
      else await scheduleNextAttemptTx(trx, boss, messageId, pausedUntil)
      await completeJobTx(trx, boss, lease)
      return { kind: 'settled', why: 'channel_paused' }
    }
    const envelope = await selectEnvelopeTx(trx, messageId)
    if (envelope === undefined) {
      // An open message without its secret cannot be sent by anyone, ever: structural, not transient.
      await deadLetterMessageTx(trx, messageId, 'decryption_failed', null, now)
      await completeJobTx(trx, boss, lease)
      return { kind: 'settled', why: 'no_ciphertext' }
    }
    await leaseMessageTx(trx, messageId, lease, now)
    return { kind: 'claimed', message: { ...message, state: 'leased' }, envelope }
  })
}
