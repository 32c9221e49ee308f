import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { batchOrEach, type Failed } from './batch-or-each.ts'
import { selectEnvelopesTx } from './ciphertexts-sql.ts'
import { leaseClaimableMessages } from './claim-sql.ts'
import { deadLetterMessagesTx, leaseMessagesTx, lockMessagesTx, type DeadLetter, type Lease, type MessageRow } from './messages-sql.ts'
import { expiredReason, invitationClosedReason, invitationStatesTx } from './invitation-states-sql.ts'
import { activeChannelPausesTx } from './provider-pauses-sql.ts'
import { waitOrExpire } from './retry-policy.ts'
import { activeJobsTx } from './pgboss-jobs-sql.ts'
import { completeJobsTx, scheduleNextAttemptTx } from './settle.ts'

export type Claim =
  /**
   * An invitation's message also carries its organization's name, for the email. `suppressed`:
   * whether its destination is on the suppression list, when the claim read it (the common case's
   * statement does; otherwise `suppressedClaims` asks).
   */
  | { kind: 'claimed'; message: MessageRow; envelope: string; organizationName?: string; suppressed?: boolean }
  /** `nextAttemptAt`: when the message was put back for a later job (a paused channel). */
  | {
      kind: 'settled'
      why: 'missing' | 'final' | 'expired' | 'no_ciphertext' | 'held_by_another_job' | 'channel_paused' | 'invitation_closed'
      nextAttemptAt?: Date
    }

/** A job of a batch whose own claim failed even alone: its job is left to pg-boss to retry. */
export type FailedClaim = Failed

/** One job attempt asking for its message. */
export type ClaimRequest = { messageId: string; lease: Lease }

/**
 * Step 1 of delivery for a whole batch of jobs: settle at once every job with nothing to send
 * (gone, final, expired, paused, held by another live job, a closed invitation), lease the rest to
 * their job attempts and read their envelopes. A message leased under an older attempt of the same
 * job is taken over: pg-boss only hands a job out again once that attempt's lease expired.
 *
 * The common case is one statement for the whole batch; whatever it leaves goes
 * through the full path, one short transaction per batch. If that transaction cannot commit (one
 * job's attempt lapsed meanwhile, a deadlock), each job is claimed again alone, so one bad job
 * never holds up the others.
 */
export async function claimMessages(
  db: Knex,
  boss: PgBoss,
  requests: readonly ClaimRequest[],
  now: Date,
): Promise<(Claim | FailedClaim)[]> {
  const common = await claimCommonCase(db, requests, now)
  const rest = requests.filter((request) => !common.has(request.messageId))
  const settled = await batchOrEach(rest, (batch) => claimBatch(db, boss, batch, now))
  return requests.map((request) => common.get(request.messageId) ?? settled[rest.indexOf(request)]!)
}

/**
 * The common case in one statement (`leaseClaimableMessages`). Anything it does not lease (and a
 * batch naming one message twice) is left to the full path.
 */
async function claimCommonCase(db: Knex, requests: readonly ClaimRequest[], now: Date): Promise<Map<string, Claim>> {
  const ids = requests.map((request) => request.messageId)
  if (ids.length === 0 || new Set(ids).size !== ids.length) return new Map()
  try {
    const rows = await leaseClaimableMessages(db, requests, now)
    return new Map(rows.map(({ envelope, suppressed, ...message }) => [message.id, { kind: 'claimed', message, envelope, suppressed }]))
  } catch {
    // A deadlock or a lost connection: the full path decides for every job instead.
    return new Map()
  }
}

/** What a batch's claims are decided on, read under the messages' locks. */
type ClaimState = Awaited<ReturnType<typeof readClaimStateTx>>

/** The writes a batch's claims decided, applied once every claim is decided. */
type ClaimPlan = {
  toLease: ClaimRequest[]
  toDeadLetter: DeadLetter[]
  toReschedule: { messageId: string; at: Date }[]
  toComplete: Lease[]
}

async function claimBatch(db: Knex, boss: PgBoss, requests: readonly ClaimRequest[], now: Date): Promise<Claim[]> {
  return await db.transaction(async (trx) => {
    const state = await readClaimStateTx(trx, requests, now)
    const plan: ClaimPlan = { toLease: [], toDeadLetter: [], toReschedule: [], toComplete: [] }
    const claims = requests.map((request) => decideClaim(request, state, plan, now))
    await deadLetterMessagesTx(trx, plan.toDeadLetter, now)
    for (const { messageId, at } of plan.toReschedule) await scheduleNextAttemptTx(trx, boss, messageId, at, { attempted: false })
    await leaseMessagesTx(trx, plan.toLease, now)
    await completeJobsTx(trx, boss, plan.toComplete)
    return claims
  })
}

/** Locks the batch's messages and reads what their claims depend on: other live holders, pauses, envelopes, invitations. */
async function readClaimStateTx(trx: Knex.Transaction, requests: readonly ClaimRequest[], now: Date) {
  const rows = new Map(
    (
      await lockMessagesTx(
        trx,
        requests.map((request) => request.messageId),
      )
    ).map((row) => [row.id, row]),
  )
  const ourJobs = new Set(requests.map((request) => request.lease.jobId))
  const foreignHolders = [...rows.values()].flatMap((row) =>
    row.state === 'leased' && row.lease_job_id && !ourJobs.has(row.lease_job_id) ? [row.lease_job_id] : [],
  )
  const liveHolders = await activeJobsTx(trx, foreignHolders)
  const pauses = await activeChannelPausesTx(trx, now)
  const envelopes = await selectEnvelopesTx(trx, [...rows.keys()])
  const invitations = await invitationStatesTx(
    trx,
    [...rows.values()].flatMap((row) => (row.invitation_id ? [row.invitation_id] : [])),
  )
  return { rows, ourJobs, liveHolders, pauses, envelopes, invitations }
}

/** One job's claim, in the batch's order (a later job for the same message sees it held by this one); its writes go to `plan`. */
function decideClaim(request: ClaimRequest, state: ClaimState, plan: ClaimPlan, now: Date): Claim {
  const { rows, ourJobs, liveHolders, pauses, envelopes, invitations } = state
  const { toLease, toDeadLetter, toReschedule, toComplete } = plan
  const { messageId, lease } = request
  const message = rows.get(messageId)
  const settle = (why: Extract<Claim, { kind: 'settled' }>['why']): Claim => {
    toComplete.push(lease)
    return { kind: 'settled', why }
  }
  if (!message || message.state === 'published' || message.state === 'dead_lettered') return settle(message ? 'final' : 'missing')
  if (
    message.state === 'leased' &&
    message.lease_job_id !== lease.jobId &&
    message.lease_job_id &&
    (liveHolders.has(message.lease_job_id) || ourJobs.has(message.lease_job_id))
  ) {
    // Another live job holds this message (one live lease, one sender: docs/architecture.md §4, step 2): it will send; this job is a duplicate.
    return settle('held_by_another_job')
  }
  if (message.expires_at.getTime() <= now.getTime()) {
    toDeadLetter.push({ messageId, reason: expiredReason(message.purpose), lastFailureClass: null })
    message.state = 'dead_lettered'
    return settle('expired')
  }
  const invitation = message.invitation_id ? invitations.get(message.invitation_id) : undefined
  const closed = message.purpose === 'invitation' ? invitationClosedReason(invitation, now) : undefined
  if (closed) {
    // A revoked, accepted or expired invitation is never leased: its token stays sealed and goes.
    toDeadLetter.push({ messageId, reason: closed, lastFailureClass: null })
    message.state = 'dead_lettered'
    return settle('invitation_closed')
  }
  const pausedUntil = pauses.get(message.channel)
  if (pausedUntil) {
    // The provider asked the fleet to back off: wait it out without spending an attempt,
    // unless the code would be useless by then.
    const fate = waitOrExpire(message, pausedUntil)
    if (fate.kind === 'expire') {
      toDeadLetter.push({ messageId, reason: fate.reason, lastFailureClass: 'THROTTLED' })
      message.state = 'dead_lettered'
    } else {
      toReschedule.push({ messageId, at: fate.until })
      message.state = 'pending'
      toComplete.push(lease)
      return { kind: 'settled', why: 'channel_paused', nextAttemptAt: pausedUntil }
    }
    return settle('channel_paused')
  }
  const envelope = envelopes.get(messageId)
  if (envelope === undefined) {
    // An open message without its secret cannot be sent by anyone, ever: structural, not transient.
    toDeadLetter.push({ messageId, reason: 'decryption_failed', lastFailureClass: null })
    message.state = 'dead_lettered'
    return settle('no_ciphertext')
  }
  toLease.push(request)
  // Later jobs of this batch for the same message see it held by this one.
  Object.assign(message, { state: 'leased', lease_job_id: lease.jobId, lease_retry_count: lease.retryCount })
  return {
    kind: 'claimed',
    message: { ...message },
    envelope,
    ...(invitation ? { organizationName: invitation.organization_name } : {}),
  }
}
