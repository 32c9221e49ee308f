import type { Knex } from 'knex'
import { enqueueSecurityMessageTx } from '../outbox/enqueue.ts'
import { deliveryChannelFor, type ChallengeDeps } from './challenges.ts'
import { findVerifiedIdentifiersTx } from './identities-sql.ts'
import { maskIdentifier, type Identifier } from './identifiers.ts'

/**
 * What a security notice reports: our own flows' changes, and the changes identity systems hand
 * over through their hooks (docs/hooks.md). A worker renders an event it has no words for as
 * "your account was changed", so a name added here never stops an older worker.
 */
export const SECURITY_EVENTS = Object.freeze([
  'sign_in_method_added',
  'sign_in_method_removed',
  'password_changed',
  'email_changed',
  'phone_changed',
  'identity_linked',
  'identity_unlinked',
  'mfa_factor_enrolled',
  'mfa_factor_unenrolled',
  'verifiable_address_changed',
  'authenticator_key_added',
  'recovery_unknown_address',
  'verification_unknown_address',
] as const)
export type SecurityEvent = (typeof SECURITY_EVENTS)[number]

/** A notice is worth delivering for a day; after that it is dead-lettered unsent like an expired code. */
export const SECURITY_NOTICE_TTL_SECONDS = 24 * 3600

/**
 * The sealed body of a security notice, `{event, at, identifier}` (what src/delivery/compose.ts
 * renders): no secret, and the identifier only as the caller already masked or named it.
 */
export function securityNoticeBody(event: SecurityEvent, at: Date, identifier: string): Buffer {
  return Buffer.from(JSON.stringify({ event, at: at.toISOString(), identifier }), 'utf8')
}

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
  const identifier = maskIdentifier(input.identifier.value)
  for (const other of await findVerifiedIdentifiersTx(trx, input.identityId)) {
    if (other.id === input.exceptLoginIdentifierId) continue
    const channel = deliveryChannelFor(deps, other)
    if (channel === undefined) {
      deps.logger.warn('security notice skipped: channel not configured', {
        identityId: input.identityId,
        kind: other.kind,
        event: input.event,
      })
      continue
    }
    const { messageId } = await enqueueSecurityMessageTx(
      trx,
      deps,
      // The owner's: a change the identity made goes to its own verified identifiers.
      { purpose: 'security_notice', channel, destination: other.value, locale: deps.locale ?? 'en', expiresAt, asked: 'owner' },
      // A buffer per message: the enqueue wipes the plaintext once it is sealed.
      securityNoticeBody(input.event, input.now, identifier),
    )
    deps.logger.info('security notice enqueued', { identityId: input.identityId, messageId, event: input.event })
  }
}
