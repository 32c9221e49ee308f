import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { generateCode, hashCode } from '../crypto/codes.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import { insertChallengeTx } from './challenges-sql.ts'
import { findVerifiedIdentifierTx } from './identities-sql.ts'
import { channelFor, type Identifier } from './identifiers.ts'
import { describeError, type Logger } from '../logging/logger.ts'

export type ChallengeDeps = EnqueueDeps & {
  codeHashKey: Buffer
  challengeTtlSeconds: number
  clock: () => Date
  logger: Logger
  /** A step run after the enqueue, inside the same transaction (tests force failures with it). */
  afterEnqueueTx?: (trx: Knex.Transaction) => Promise<void>
}

/**
 * OX-S3: the challenge and its outbox message commit together, or neither does. Known and unknown
 * identifiers do the same work up to the lookup and answer the same shape, so the answer reveals
 * nothing; an unknown identifier simply enqueues nothing.
 */
export async function requestPasswordRecoveryTx(
  trx: Knex.Transaction,
  deps: ChallengeDeps,
  identifier: Identifier,
): Promise<{ challengeExpiresAt: Date }> {
  const now = deps.clock()
  const expiresAt = new Date(now.getTime() + deps.challengeTtlSeconds * 1000)
  const challengeId = uuidv7()
  const code = generateCode()
  try {
    const codeHash = hashCode(deps.codeHashKey, challengeId, code)
    const known = await findVerifiedIdentifierTx(trx, identifier)
    if (known) {
      // A savepoint: a failure that only a known identifier can hit rolls back its own rows and is
      // logged, while the answer stays the same 202 an unknown identifier gets (OX-S3).
      await trx
        .transaction(async (savepoint) => {
          await insertChallengeTx(savepoint, {
            id: challengeId,
            purpose: 'password_recovery',
            identityId: known.identity_id,
            loginIdentifierId: known.login_identifier_id,
            codeHash,
            expiresAt,
            now,
          })
          await enqueueSecurityMessageTx(
            savepoint,
            deps,
            { purpose: 'password_recovery', challengeId, channel: channelFor(identifier), destination: identifier.value, locale: 'en', expiresAt },
            code,
          )
          await deps.afterEnqueueTx?.(savepoint)
        })
        .catch((error: unknown) => deps.logger.error('password recovery not enqueued', { challengeId, ...describeError(error) }))
    }
  } finally {
    code.fill(0)
  }
  return { challengeExpiresAt: expiresAt }
}
