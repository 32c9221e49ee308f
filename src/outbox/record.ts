import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { withTransientRetry } from '../db/transient.ts'
import type { Logger } from '../logging/logger.ts'
import { batchOrEach, type Failed } from './batch-or-each.ts'
import type { Recorded, RecordRequest } from './outcomes.ts'
import { answersOf } from './provider-answers.ts'
import { defaultHealthPolicy } from './provider-health.ts'
import { noteProviderAnswersTx } from './provider-states-sql.ts'
import { publishLeasedMessagesTx } from './publish-sql.ts'
import { recordBatchTx } from './record-batch.ts'
import type { RetrySettings } from './retry-policy.ts'
import { completeJobsTx } from './settle.ts'

/**
 * Step 5 of delivery (the pipeline's record step, in group commits): only the job attempt that
 * still holds a message's lease may record for it. Attempt rows, state changes, ciphertext deletes,
 * next jobs and the settlement of the jobs commit together or not at all. If the batch cannot
 * commit (one job's attempt lapsed meanwhile, a deadlock), each outcome is recorded again alone, so
 * a lost lease costs only its own record; a failure is reported per request, never thrown. A
 * transient database error (a deadlock, a lock timeout: src/db/transient.ts) is first tried again
 * in a new transaction, the group and then each alone: the sends already left, and a record failed
 * back to pg-boss would send them again.
 */
export async function recordOutcomesEach(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
  logger?: Logger,
): Promise<(Recorded | Failed)[]> {
  const retried = { logger, what: 'delivery record' }
  // Publications, the common case, take one statement; anything else goes through the full path.
  const published = requests.filter((request) => request.outcome.kind === 'published')
  const others = requests.filter((request) => request.outcome.kind !== 'published')
  const [fast, full] = await Promise.all([
    batchOrEach(published, (batch) => withTransientRetry(db, () => recordPublishedBatch(db, boss, settings, batch, now), retried)),
    batchOrEach(others, (batch) =>
      withTransientRetry(db, () => db.transaction((trx) => recordBatchTx(trx, boss, settings, batch, now)), retried),
    ),
  ])
  return requests.map((request) =>
    request.outcome.kind === 'published' ? fast[published.indexOf(request)]! : full[others.indexOf(request)]!,
  )
}

/**
 * Publications in one statement inside a short transaction (BEGIN, the statement, pg-boss's
 * complete, COMMIT): lock in id order the messages still leased to these very job attempts, insert
 * their attempt rows, publish them and delete their ciphertexts; then complete exactly those jobs
 * with their `{id, retryCount}`. A message no longer leased to its attempt records nothing. The
 * breaker hears only of probes among them: a publication costs no write to provider state.
 */
async function recordPublishedBatch(
  db: Knex,
  boss: PgBoss,
  settings: RetrySettings,
  requests: readonly RecordRequest[],
  now: Date,
): Promise<Recorded[]> {
  if (new Set(requests.map((request) => request.messageId)).size !== requests.length) throw new Error('one message twice in a record batch')
  return await db.transaction(async (trx): Promise<Recorded[]> => {
    const rows = await publishLeasedMessagesTx(
      trx,
      requests.map((request) => ({
        messageId: request.messageId,
        lease: request.lease,
        providerMessageId: request.outcome.kind === 'published' ? request.outcome.providerMessageId : '',
        durationMs: request.outcome.kind === 'published' ? request.outcome.durationMs : 0,
        provider: request.outcome.kind === 'published' ? (request.outcome.provider?.id ?? null) : null,
        channel: request.outcome.kind === 'published' ? (request.outcome.provider?.channel ?? null) : null,
      })),
      now,
    )
    const locked = new Map(rows.map((row) => [row.id, row]))
    await completeJobsTx(
      trx,
      boss,
      requests.filter((request) => locked.has(request.messageId)).map((request) => request.lease),
    )
    const answers = answersOf(
      requests.flatMap((request) => {
        const row = locked.get(request.messageId)
        return row ? [{ outcome: request.outcome, channel: row.channel }] : []
      }),
    )
    const transitions =
      answers.length > 0 ? await noteProviderAnswersTx(trx, answers, now, settings.providerHealth ?? defaultHealthPolicy()) : []
    const results = requests.map((request): Recorded => {
      const row = locked.get(request.messageId)
      return row === undefined ? { kind: 'lease_lost' } : { kind: 'published', attemptNo: row.attempt_count + 1 }
    })
    if (transitions.length > 0) results[0]!.transitions = transitions
    return results
  })
}
