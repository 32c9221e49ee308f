import type { Knex } from 'knex'
import { generateCode, hashCode } from '../crypto/codes.ts'
import type { Channel } from '../outbox/constants.ts'
import { nextPhoneChannel } from '../outbox/channel-routing.ts'
import { enqueueSecurityMessageTx } from '../outbox/enqueue.ts'
import { phoneFallbackCandidateTx } from '../outbox/web-functions-sql.ts'
import type { ChallengeDeps } from './challenges.ts'
import { replaceChallengeCodeTx } from './challenges-sql.ts'

/** What the asynchronous fallback did with one message: the new message, or why nothing. */
export type PhoneFallback = { fellBackTo: Channel; messageId: string } | { refused: string }

/**
 * The asynchronous phone fallback (docs/delivery.md "Phone channels"): a provider accepted a phone
 * code, then its status webhook said the channel cannot reach the number (no WhatsApp on it). The
 * published message has no ciphertext left, so the code is not sent again: a NEW code for the same
 * challenge, with the same expiry, goes on the next phone channel of PHONE_CHANNELS that the fleet
 * has, to the challenge's own identifier — the old code stops verifying (one usable code), and the
 * new envelope binds the new channel and that number. One transaction: the checks and the lock of
 * `outbox.phone_fallback_candidate`, the code, the message and its job. Anything that does not
 * qualify (not published, not last sent on that channel, no channel left, a consumed, revoked or
 * expired challenge, a newer message already — a replayed webhook) does nothing and is logged by
 * its code, never thrown.
 */
export async function fallBackToNextPhoneChannel(
  db: Knex,
  deps: Pick<ChallengeDeps, 'boss' | 'outboxKey' | 'codeHashKey' | 'envelopeVersion' | 'channels' | 'phoneChannels' | 'clock' | 'logger'>,
  messageId: string,
  failed: Channel = 'whatsapp',
): Promise<PhoneFallback> {
  const next = nextPhoneChannel(deps, failed)
  const outcome: PhoneFallback = next
    ? await db.transaction(async (trx): Promise<PhoneFallback> => {
        const now = deps.clock()
        const candidate = await phoneFallbackCandidateTx(trx, messageId, { failed, next }, now)
        if (candidate.refusal !== null) return { refused: candidate.refusal }
        const code = generateCode()
        try {
          await replaceChallengeCodeTx(trx, candidate.challenge_id, hashCode(deps.codeHashKey, candidate.challenge_id, code), now)
          const enqueued = await enqueueSecurityMessageTx(
            trx,
            deps,
            {
              purpose: candidate.purpose,
              challengeId: candidate.challenge_id,
              channel: next,
              destination: candidate.destination,
              locale: candidate.locale,
              expiresAt: candidate.expires_at,
              // The same challenge's code again, for whoever asked for the one that could not reach the number.
              askedLike: messageId,
            },
            code,
          )
          return { fellBackTo: next, messageId: enqueued.messageId }
        } finally {
          code.fill(0)
        }
      })
    : { refused: 'no_phone_channel_left' }
  if ('refused' in outcome) deps.logger.info('phone fallback not taken', { messageId, failedChannel: failed, why: outcome.refused })
  else
    deps.logger.info('phone fallback: a new code for the same challenge goes on the next phone channel', {
      messageId,
      failedChannel: failed,
      channel: outcome.fellBackTo,
      newMessageId: outcome.messageId,
    })
  return outcome
}
