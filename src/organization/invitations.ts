import { createHash, randomBytes } from 'node:crypto'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { uuidv7 } from 'uuidv7'
import { ConflictError, ForbiddenError, InvalidInvitationError, NotFoundError } from '../identity/errors.ts'
import { canonicalDestination } from '../identity/identifiers.ts'
import { DESTINATION_BUDGET, destinationBucket } from '../identity/challenges.ts'
import { hitRateLimit } from '../identity/rate-limits.ts'
import type { KeyRing } from '../crypto/key-ring.ts'
import { bucketKeys } from '../identity/secrets.ts'
import { enqueueSecurityMessageTx, type EnqueueDeps } from '../outbox/enqueue.ts'
import { deadLetterInvitationMessagesTx } from '../outbox/web-functions-sql.ts'
import { holdsVerifiedIdentifierTx } from '../identity/identities-sql.ts'
import { organizationNameOrThrow } from './organization-name.ts'
import {
  countPendingInvitationsTx,
  insertInvitationTx,
  lockInvitationByTokenHashTx,
  lockInvitationStatusTx,
  lockPendingInvitationOfAddressTx,
  markInvitationAcceptedTx,
  markInvitationRevokedTx,
} from './invitations-sql.ts'
import { insertMemberTx, insertOrganizationTx, lockOrganizationOfAdminTx } from './organizations-sql.ts'
import type { Logger } from '../logging/logger.ts'

/**
 * Limits on organizations and invitations (docs/architecture.md §7, budgets), counted in
 * the database under locks, so they hold across any number of web processes: the organization's
 * row lock serializes its invitations, and every other count is an advisory-locked rate-limit
 * bucket keyed by an HMAC. A person's invitation budget is kept per inviting organization and per
 * inviter, never globally per address, so throw-away organizations cannot use it up for the
 * organizations that really mean to invite them.
 */
export const INVITATION_LIMITS = Object.freeze({
  pendingPerOrganization: 50,
  perOrganizationPerHour: 20,
  perInviterPerDay: 50,
  perAddressPerOrganizationPerDay: 3,
  perAddressPerInviterPerDay: 3,
})

export const ORGANIZATION_LIMITS = Object.freeze({ perIdentityPerDay: 5 })

export type InvitationDeps = {
  boss: PgBoss
  outboxKey: KeyRing
  codeHashKey: Buffer
  /** Every CODE_HASH_KEYS key, current first (budgets are counted under all). */
  codeHashKeys?: readonly Buffer[]
  invitationTtlSeconds: number
  clock: () => Date
  logger?: Logger
  /** The envelope version every live worker opens (src/outbox/envelope-negotiation.ts). */
  envelopeVersion?: EnqueueDeps['envelopeVersion']
}

/** The SHA-256 a token is stored as; the token itself is 32 random bytes, base64url in the link. */
export function invitationTokenHash(token: Buffer): Buffer {
  return createHash('sha256').update(token).digest()
}

/**
 * `POST /organizations`: the name is checked (no links, addresses or forged lines; stored in its
 * NFKC form), the creator's daily count is taken, and the creator becomes its admin, in one transaction.
 */
export async function createOrganization(
  db: Knex,
  deps: Pick<InvitationDeps, 'codeHashKey' | 'clock'>,
  creatorId: string,
  rawName: string,
): Promise<{ id: string }> {
  const name = organizationNameOrThrow(rawName)
  const id = uuidv7()
  await db.transaction(async (trx) => {
    const now = deps.clock()
    await hitRateLimit(
      trx,
      bucketKeys(deps, 'organization-creator', creatorId),
      { max: ORGANIZATION_LIMITS.perIdentityPerDay, windowSeconds: 86_400 },
      now,
      'organization_rate_limited',
    )
    await insertOrganizationTx(trx, { id, name, createdBy: creatorId }, now)
  })
  return { id }
}

/** One answer whether the organization is missing, someone else's, or the caller is no admin of it. */
export const notOrganizationAdmin = () => new ForbiddenError('not_organization_admin', 'Only an admin of this organization may do this.')
export const invitationNotFound = () => new NotFoundError('invitation_not_found', 'This organization has no such invitation.')

/**
 * Locks the organization for this transaction if the caller is one of its admins, else refuses
 * with one 403 whether the organization does not exist or the caller is not its admin.
 */
async function lockAsAdminTx(trx: Knex.Transaction, organizationId: string, identityId: string): Promise<void> {
  if (!(await lockOrganizationOfAdminTx(trx, organizationId, identityId))) throw notOrganizationAdmin()
}

/**
 * `POST /organizations/:id/invitations`: in the caller's one transaction, the limits, the
 * revocation of a previous pending invitation of the same address (its unsent message is
 * dead-lettered `invitation_revoked`), the invitation row (token hash only), and the outbox message
 * with the token sealed under the outbox key (AAD `<messageId>:invitation`). The token buffer is
 * wiped by the enqueue once sealed; no string copy of it is ever made here.
 */
export async function inviteTx(
  trx: Knex.Transaction,
  deps: InvitationDeps,
  input: { organizationId: string; inviterId: string; email: string; locale?: string },
): Promise<{ invitationId: string; expiresAt: Date }> {
  const now = deps.clock()
  await lockAsAdminTx(trx, input.organizationId, input.inviterId)
  await spendInvitationBudgetsTx(trx, deps, input, now)

  const previousId = await lockPendingInvitationOfAddressTx(trx, input.organizationId, input.email)
  if (previousId) await revokeTx(trx, previousId, now)
  if ((await countPendingInvitationsTx(trx, input.organizationId, now)) >= INVITATION_LIMITS.pendingPerOrganization) {
    throw new ConflictError('pending_invitation_limit', 'This organization has too many pending invitations; revoke some first.')
  }

  const invitationId = uuidv7()
  const expiresAt = new Date(now.getTime() + deps.invitationTtlSeconds * 1000)
  const token = randomBytes(32)
  await insertInvitationTx(
    trx,
    {
      id: invitationId,
      organizationId: input.organizationId,
      email: input.email,
      tokenHash: invitationTokenHash(token),
      invitedBy: input.inviterId,
      expiresAt,
    },
    now,
  )
  await enqueueSecurityMessageTx(
    trx,
    {
      boss: deps.boss,
      outboxKey: deps.outboxKey,
      codeHashKey: deps.codeHashKey,
      logger: deps.logger,
      envelopeVersion: deps.envelopeVersion,
    },
    // A stranger's: any admin of any organization may invite any address, a real owner's too.
    {
      purpose: 'invitation',
      invitationId,
      channel: 'email',
      destination: input.email,
      locale: input.locale ?? 'en',
      expiresAt,
      asked: 'stranger',
    },
    token,
  )
  return { invitationId, expiresAt }
}

/**
 * The invitation's budgets: per address and organization, per address and inviter, per inviter,
 * per organization, and the mailbox's own (refused with 429 when one is spent).
 */
async function spendInvitationBudgetsTx(
  trx: Knex.Transaction,
  deps: InvitationDeps,
  input: { organizationId: string; inviterId: string; email: string },
  now: Date,
): Promise<void> {
  const mailbox = canonicalDestination({ kind: 'email', value: input.email })
  const day = { windowSeconds: 86_400 }
  await hitRateLimit(
    trx,
    bucketKeys(deps, 'invitation-address-organization', `${input.organizationId}:${mailbox}`),
    { ...day, max: INVITATION_LIMITS.perAddressPerOrganizationPerDay },
    now,
    'invitation_address_rate_limited',
  )
  await hitRateLimit(
    trx,
    bucketKeys(deps, 'invitation-address-inviter', `${input.inviterId}:${mailbox}`),
    { ...day, max: INVITATION_LIMITS.perAddressPerInviterPerDay },
    now,
    'invitation_address_rate_limited',
  )
  await hitRateLimit(
    trx,
    bucketKeys(deps, 'invitation-inviter', input.inviterId),
    { ...day, max: INVITATION_LIMITS.perInviterPerDay },
    now,
    'invitation_inviter_rate_limited',
  )
  await hitRateLimit(
    trx,
    bucketKeys(deps, 'invitation-organization', input.organizationId),
    { max: INVITATION_LIMITS.perOrganizationPerHour, windowSeconds: 3_600 },
    now,
    'invitation_rate_limited',
  )
  // The mailbox's own budget, which its codes spend too: however many organizations and inviters
  // join in, what reaches one mailbox an hour stays under the ceiling every stranger shares
  // (docs/delivery.md "Send caps"). The inviter is told (429): an invitation is no anonymous route.
  await hitRateLimit(trx, destinationBucket(deps, { kind: 'email', value: input.email }), DESTINATION_BUDGET.ceiling, now)
}

async function revokeTx(trx: Knex.Transaction, invitationId: string, now: Date): Promise<void> {
  await markInvitationRevokedTx(trx, invitationId, now)
  await deadLetterInvitationMessagesTx(trx, invitationId, 'invitation_revoked', now)
}

/** `DELETE /organizations/:id/invitations/:invitationId`: revokes; revoking twice is a no-op. */
export async function revokeInvitation(
  db: Knex,
  input: { organizationId: string; invitationId: string; identityId: string },
  now: Date,
): Promise<void> {
  await db.transaction(async (trx) => {
    await lockAsAdminTx(trx, input.organizationId, input.identityId)
    const status = await lockInvitationStatusTx(trx, input.organizationId, input.invitationId)
    if (!status) throw invitationNotFound()
    if (status === 'accepted') throw new ConflictError('invitation_accepted', 'The invitation was already accepted.')
    if (status === 'pending') await revokeTx(trx, input.invitationId, now)
  })
}

/**
 * `POST /invitations/acceptance`: a pending, unexpired invitation found by its token's hash makes
 * the signed-in caller a member, once, if the caller holds the invited address as a verified
 * identifier (a forwarded link joins no other account); the invitation is accepted and any unsent
 * message of it is dead-lettered `invitation_accepted`. Every other token, and a caller who is not
 * the invited person, gets the same 422 and leaves the invitation pending.
 */
export async function acceptInvitation(
  db: Knex,
  input: { identityId: string; token: string },
  now: Date,
): Promise<{ organizationId: string }> {
  const token = Buffer.from(input.token, 'base64url')
  if (token.length !== 32 || token.toString('base64url') !== input.token) throw new InvalidInvitationError()
  const tokenHash = invitationTokenHash(token)
  token.fill(0)
  return await db.transaction(async (trx) => {
    const invitation = await lockInvitationByTokenHashTx(trx, tokenHash)
    if (!invitation || invitation.status !== 'pending' || invitation.expires_at.getTime() <= now.getTime())
      throw new InvalidInvitationError()
    if (!(await holdsVerifiedIdentifierTx(trx, input.identityId, { kind: 'email', value: invitation.email })))
      throw new InvalidInvitationError()
    await insertMemberTx(trx, invitation.organization_id, input.identityId)
    await markInvitationAcceptedTx(trx, invitation.id, input.identityId, now)
    await deadLetterInvitationMessagesTx(trx, invitation.id, 'invitation_accepted', now)
    return { organizationId: invitation.organization_id }
  })
}
