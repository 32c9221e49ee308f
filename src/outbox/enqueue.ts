import { randomUUID } from 'node:crypto'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { uuidv7 } from 'uuidv7'
import { envelopeContext, seal, type EnvelopeVersion } from '../crypto/envelope.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { captureJobInsert } from '../db/boss.ts'
import type { Logger } from '../logging/logger.ts'
import { currentTraceparent, inSpan } from '../logging/trace-context.ts'
import { QUEUES, type DeliveryJobData } from './constants.ts'
import { destinationHmac } from './destination.ts'
import type { NewMessage } from './messages-sql.ts'
import { enqueueMessageTx, type SealedMessage } from './web-functions-sql.ts'

/**
 * `outboxKey` is the OUTBOX_ENCRYPTION_KEYS ring: its first key seals. `codeHashKey` (CODE_HASH_KEYS'
 * current key) keys the destination's HMAC, which the suppression list is matched on.
 * `envelopeVersion`: the version every live worker opens (src/outbox/envelope-negotiation.ts);
 * the newest when omitted.
 */
export type EnqueueDeps = {
  boss: PgBoss
  outboxKey: KeyRing
  codeHashKey: Buffer
  logger?: Logger
  envelopeVersion?: () => EnvelopeVersion
}

export type MessageToSeal = Omit<NewMessage, 'id' | 'jobId' | 'destinationHmac'>

/**
 * Seals a message for `outbox.enqueue_message`: its ids, its envelope (the secret buffer is wiped
 * once sealed, whatever happens), the destination's HMAC and its pg-boss job as `boss.send` would
 * write it (the JSON `outbox.insert_delivery_job` takes). No I/O.
 */
export async function sealMessage(deps: EnqueueDeps, message: MessageToSeal, secret: Buffer): Promise<SealedMessage> {
  // The enqueue's span: the job carries its traceparent, so the worker's delivery and provider call join this trace.
  return await inSpan(
    'outbox enqueue',
    { kind: 'producer', attributes: { 'sealpost.purpose': message.purpose, 'sealpost.channel': message.channel } },
    async (span) => {
      const messageId = uuidv7()
      span.setAttribute('sealpost.message_id', messageId)
      let envelope: string
      try {
        const version = deps.envelopeVersion?.()
        envelope = seal(deps.outboxKey, secret, envelopeContext(messageId, message.purpose, message.channel, message.destination), version)
      } finally {
        secret.fill(0)
      }
      const jobId = randomUUID()
      const traceparent = currentTraceparent()
      const data: DeliveryJobData = traceparent ? { messageId, traceparent } : { messageId }
      return {
        message_id: messageId,
        job_id: jobId,
        purpose: message.purpose,
        challenge_id: message.challengeId ?? null,
        invitation_id: message.invitationId ?? null,
        ...(message.apiKeyId ? { api_key_id: message.apiKeyId } : {}),
        ...(message.asked ? { asked: message.asked } : {}),
        ...(message.askedLike ? { asked_like: message.askedLike } : {}),
        ...(message.carriers ? { carriers: message.carriers } : {}),
        channel: message.channel,
        destination: message.destination,
        locale: message.locale,
        destination_hmac: destinationHmac(deps.codeHashKey, message.channel, message.destination).toString('hex'),
        expires_at: message.expiresAt.toISOString(),
        envelope,
        job_json: (await captureJobInsert(deps.boss, QUEUES.delivery, data, jobId)).json,
      }
    },
  )
}

/** Follows one message from its request (the line carries X-Request-ID) to the worker's send. */
export function logEnqueued(deps: Pick<EnqueueDeps, 'logger'>, message: SealedMessage): void {
  deps.logger?.info('message enqueued', {
    messageId: message.message_id,
    jobId: message.job_id,
    purpose: message.purpose,
    channel: message.channel,
  })
}

/**
 * Writes a security message, its sealed secret and its pg-boss job inside the caller's
 * transaction, in one round trip; it never opens or commits one, so the business change and the
 * message share one COMMIT. The secret buffer is wiped once sealed, whatever happens.
 */
export async function enqueueSecurityMessageTx(
  trx: Knex.Transaction,
  deps: EnqueueDeps,
  message: MessageToSeal,
  secret: Buffer,
): Promise<{ messageId: string }> {
  const sealed = await sealMessage(deps, message, secret)
  await enqueueMessageTx(trx, sealed)
  logEnqueued(deps, sealed)
  return { messageId: sealed.message_id }
}
