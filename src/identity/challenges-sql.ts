import type { Knex } from 'knex'
import type { ChallengePurpose } from '../outbox/constants.ts'

const CHALLENGES = 'identity.challenges'

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

/**
 * The open challenges of a subject, newest first: not consumed, revoked, expired or out of
 * attempts. The subject's ids may be column references, for a lookup that correlates it.
 */
function openChallenges(
  db: Knex | Knex.Transaction,
  subject: {
    purpose: ChallengePurpose
    identityId: string | Knex.Ref<string, object>
    loginIdentifierId: string | Knex.Ref<string, object>
  },
  now: Date,
) {
  return db(CHALLENGES)
    .where({ purpose: subject.purpose, identity_id: subject.identityId, login_identifier_id: subject.loginIdentifierId })
    .whereNull('consumed_at')
    .whereNull('revoked_at')
    .andWhere('expires_at', '>', now)
    .andWhere('attempts_left', '>', 0)
    .orderBy('created_at', 'desc')
}

function openChallenge(db: Knex | Knex.Transaction, subject: ChallengeSubject, now: Date) {
  return openChallenges(db, subject, now)
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
    .first<ChallengeRow | undefined>()
}

/** The id of the open challenge for `purpose` of the login identifier `li` of the enclosing query, as a subquery. */
export function openChallengeIdOfLoginIdentifier(db: Knex | Knex.Transaction, purpose: ChallengePurpose, now: Date) {
  return openChallenges(db, { purpose, identityId: db.ref('li.identity_id'), loginIdentifierId: db.ref('li.id') }, now)
    .select('id')
    .limit(1)
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
 * The id of the subject's open challenge, unlocked: a resend's code hash is bound to it, computed
 * here before `identity.issue_challenge` (the key never reaches the database), which takes the
 * lock and refuses the resend if another challenge opened in between.
 */
export async function openChallengeId(trx: Knex | Knex.Transaction, subject: ChallengeSubject, now: Date): Promise<string | undefined> {
  const row = await openChallenges(trx, subject, now).first<{ id: string } | undefined>('id')
  return row?.id
}

/** What `identity.issue_challenge` decided (migration 20261201000800). */
export type IssueOutcome = {
  outcome: 'issued' | 'no_subject' | 'rate_limited' | 'resend_too_soon' | 'too_many_resends' | 'failed'
  challenge_id?: string
  retry_after_seconds?: number | null
  /** The SQLSTATE of an issue or rehearsal that failed unexpectedly (hidden mode only). */
  failure?: string | null
}

/** One call: the whole issue, real or rehearsed, in the database (`params` as `runIssue` builds them). */
export async function issueChallengeSql(trx: Knex | Knex.Transaction, params: Record<string, unknown>): Promise<IssueOutcome> {
  const { rows } = await trx.raw<{ rows: { result: IssueOutcome }[] }>('SELECT identity.issue_challenge(?::jsonb) AS result', [
    JSON.stringify(params),
  ])
  return rows[0]!.result
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

/** Revokes every open challenge sent to one login identifier; answers their ids. */
export async function revokeOpenChallengesOfIdentifierTx(trx: Knex.Transaction, loginIdentifierId: string, now: Date): Promise<string[]> {
  const rows = await trx(CHALLENGES)
    .where({ login_identifier_id: loginIdentifierId })
    .whereNull('consumed_at')
    .whereNull('revoked_at')
    .update({ revoked_at: now }, ['id'])
  return rows.map((row: { id: string }) => row.id)
}

/** Binds a new code to a challenge (a staff reissue of its dead letter): the old code stops working. */
export async function replaceChallengeCodeTx(trx: Knex.Transaction, id: string, codeHash: Buffer, now: Date): Promise<void> {
  await trx(CHALLENGES).where({ id }).update({ code_hash: codeHash, last_sent_at: now })
}
