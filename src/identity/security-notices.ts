import type { Knex } from 'knex'
import { enqueueSecurityMessageTx } from '../outbox/enqueue.ts'
import { deliveryChannelFor, type ChallengeDeps } from './challenges.ts'
import { findVerifiedIdentifiersTx } from './identities-sql.ts'
import { maskIdentifier, type Identifier } from './identifiers.ts'

/** What a security notice reports. */
export type SecurityEvent = 'sign_in_method_added' | 'sign_in_method_removed' | 'password_changed'

/** A notice is worth delivering for a day; after that it is dead-lettered unsent like an expired code. */
export const SECURITY_NOTICE_TTL_SECONDS = 24 * 3600

/**
 * Tells every other verified identifier of the identity (all of them without
 * `exceptLoginIdentifierId`) what changed and when, in the caller's transaction, so the change and
 * its notices commit together. The body names the identifier
 * involved only masked, holds no secret and no link (nothing a phisher could copy to look like
 * us), and is sealed like any other outbox message. Identifiers on a channel this deployment
 * cannot deliver on are skipped (logged).
 */
export async function notifyOtherIdentifiersTx(
  trx: Knex.Transaction,
  deps: Pick<ChallengeDeps, 'boss' | 'outboxKey' | 'codeHashKey' | 'channels' | 'phoneChannels' | 'logger' | 'locale' | 'envelopeVersion'>,
  input: { identityId: string; exceptLoginIdentifierId?: string; event: SecurityEvent; identifier: Identifier; now: Date },
): Promise<void> {
  const expiresAt = new Date(input.now.getTime() + SECURITY_NOTICE_TTL_SECONDS * 1000)
  const body = JSON.stringify({ event: input.event, at: input.now.toISOString(), identifier: maskIdentifier(input.identifier.value) })
  for (const other of await findVerifiedIdentifiersTx(trx, input.identityId)) {
    if (other.id === input.exceptLoginIdentifierId) continue
    const channel = deliveryChannelFor(deps, other)
    if (!deps.channels.has(channel)) {
      deps.logger.warn('security notice skipped: channel not configured', { identityId: input.identityId, channel, event: input.event })
      continue
    }
    const { messageId } = await enqueueSecurityMessageTx(
      trx,
      deps,
      { purpose: 'security_notice', channel, destination: other.value, locale: deps.locale ?? 'en', expiresAt },
      Buffer.from(body, 'utf8'),
    )
    deps.logger.info('security notice enqueued', { identityId: input.identityId, messageId, event: input.event })
  }
}
