import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { uuidv7 } from 'uuidv7'
import { envelopeContext, seal } from '../crypto/envelope.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import type { Logger } from '../logging/logger.ts'
import { QUEUES, type DeliveryJobData } from './constants.ts'
import { destinationHmac } from './destination.ts'
import { insertMessageWithCiphertextTx, type AlongsideSql, type NewMessage } from './messages-sql.ts'

/**
 * `outboxKey` is the OUTBOX_ENCRYPTION_KEYS ring: its first key seals. `codeHashKey` (CODE_HASH_KEYS'
 * current key) keys the destination's HMAC, which the suppression list is matched on.
 */
export type EnqueueDeps = { boss: PgBoss; outboxKey: KeyRing; codeHashKey: Buffer; logger?: Logger }

/**
 * Writes a security message, its sealed secret and its pg-boss job inside the caller's
 * transaction; it never opens or commits one, so the business change and the message share one
 * COMMIT. The secret buffer is wiped once sealed, whatever happens. `alongside`: the caller's own
 * write (its challenge) folded into the message's statement, one round trip fewer.
 */
export async function enqueueSecurityMessageTx(
  trx: Knex.Transaction,
  deps: EnqueueDeps,
  message: Omit<NewMessage, 'id' | 'jobId' | 'destinationHmac'>,
  secret: Buffer,
  alongside?: AlongsideSql,
): Promise<{ messageId: string }> {
  const messageId = uuidv7()
  let envelope: string
  try {
    envelope = seal(deps.outboxKey, secret, envelopeContext(messageId, message.purpose, message.channel, message.destination))
  } finally {
    secret.fill(0)
  }
  const jobId = randomUUID()
  await insertMessageWithCiphertextTx(
    trx,
    { ...message, id: messageId, jobId, destinationHmac: destinationHmac(deps.codeHashKey, message.channel, message.destination) },
    envelope,
    alongside,
  )
  const data: DeliveryJobData = { messageId }
  await deps.boss.send(QUEUES.delivery, data, { db: fromKnex(trx), id: jobId })
  // Follows one message from its request (the line carries X-Request-ID) to the worker's send.
  deps.logger?.info('message enqueued', { messageId, jobId, purpose: message.purpose, channel: message.channel })
  return { messageId }
}
