import type { Knex } from 'knex'
import type { ChallengePurpose } from '../outbox/constants.ts'
import type { AlongsideSql } from '../outbox/messages-sql.ts'

const CHALLENGES = 'identity.challenges'

export type NewChallenge = {
  id: string
  purpose: ChallengePurpose
  identityId: string
  loginIdentifierId: string
  codeHash: Buffer
  expiresAt: Date
  now: Date
  candidatePasswordHash?: string
}

export type ChallengeRow = {
  id: string
  purpose: ChallengePurpose
  identity_id: string
  login_identifier_id: string
  code_hash: Buffer
  expires_at: Date
  attempts_left: number
  resend_count: number
  last_sent_at: Date
  candidate_password_hash: string | null
}

export type ChallengeSubject = { purpose: ChallengePurpose; identityId: string; loginIdentifierId: string }

/** A new challenge, as a statement to run alongside its message's insert (`enqueueSecurityMessageTx`). */
export function insertChallengeSql(challenge: NewChallenge): AlongsideSql {
  return {
    sql: `INSERT INTO ${CHALLENGES} (id, purpose, identity_id, login_identifier_id, code_hash, expires_at, last_sent_at, created_at, candidate_password_hash)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    bindings: [
      challenge.id,
      challenge.purpose,
      challenge.identityId,
      challenge.loginIdentifierId,
      challenge.codeHash,
      challenge.expiresAt,
      challenge.now,
      challenge.now,
      challenge.candidatePasswordHash ?? null,
    ],
  }
}

/** The open challenge of a subject: not consumed, revoked, expired or out of attempts. */
function openChallenge(db: Knex | Knex.Transaction, subject: ChallengeSubject, now: Date) {
  return db(CHALLENGES)
    .select(
      'id',
      'purpose',
      'identity_id',
      'login_identifier_id',
      'code_hash',
      'expires_at',
      'attempts_left',
      'resend_count',
      'last_sent_at',
      'candidate_password_hash',
    )
    .where({ purpose: subject.purpose, identity_id: subject.identityId, login_identifier_id: subject.loginIdentifierId })
    .whereNull('consumed_at')
    .whereNull('revoked_at')
    .andWhere('expires_at', '>', now)
    .andWhere('attempts_left', '>', 0)
    .orderBy('created_at', 'desc')
    .first<ChallengeRow | undefined>()
}

/** The open challenge of a subject, locked for this transaction. */
export async function lockOpenChallengeTx(trx: Knex.Transaction, subject: ChallengeSubject, now: Date): Promise<ChallengeRow | undefined> {
  return await openChallenge(trx, subject, now).forUpdate()
}

/** The open challenge of a subject as it is now, unlocked: for work that must not hold a lock (argon2). */
export async function findOpenChallenge(db: Knex, subject: ChallengeSubject, now: Date): Promise<ChallengeRow | undefined> {
  return await openChallenge(db, subject, now)
}

/**
 * A resend: the new code replaces the old one, which stops verifying at once. As a statement to
 * run alongside the new message's insert (`enqueueSecurityMessageTx`).
 */
export function rotateChallengeCodeSql(
  id: string,
  change: { codeHash: Buffer; expiresAt: Date; now: Date; candidatePasswordHash?: string },
): AlongsideSql {
  return {
    sql: `UPDATE ${CHALLENGES} SET code_hash = ?, expires_at = ?, last_sent_at = ?, resend_count = resend_count + 1${
      change.candidatePasswordHash ? ', candidate_password_hash = ?' : ''
    } WHERE id = ?`,
    bindings: [change.codeHash, change.expiresAt, change.now, ...(change.candidatePasswordHash ? [change.candidatePasswordHash] : []), id],
  }
}

/** One wrong code: returns the attempts the challenge has left (0 = dead). */
export async function spendAttemptTx(trx: Knex.Transaction, id: string): Promise<number> {
  const [row] = await trx(CHALLENGES)
    .where({ id })
    .update({ attempts_left: trx.raw('attempts_left - 1') })
    .returning('attempts_left')
  return (row as { attempts_left: number }).attempts_left
}

export async function consumeChallengeTx(trx: Knex.Transaction, id: string, now: Date): Promise<void> {
  await trx(CHALLENGES).where({ id }).update({ consumed_at: now })
}
