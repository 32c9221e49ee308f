import type { Knex } from 'knex'
import type { DeadLetterReason } from './constants.ts'

/** What the worker may know of an invitation: its state, its expiry and its organization's name. */
export type InvitationState = { status: 'pending' | 'accepted' | 'revoked' | 'expired'; expires_at: Date; organization_name: string }

/** The states of several invitations, by id (the worker role may read exactly these columns). */
export async function invitationStatesTx(trx: Knex.Transaction, invitationIds: readonly string[]): Promise<Map<string, InvitationState>> {
  if (invitationIds.length === 0) return new Map()
  const rows: (InvitationState & { id: string })[] = await trx('organization.invitations as i')
    .join('organization.organizations as o', 'o.id', 'i.organization_id')
    .whereIn('i.id', [...new Set(invitationIds)])
    .select('i.id', 'i.status', 'i.expires_at', 'o.name as organization_name')
  return new Map(rows.map((row) => [row.id, row]))
}

/** Why an invitation's message must not be sent (or sent again) now, if it must not. */
export function invitationClosedReason(state: InvitationState | undefined, now: Date): DeadLetterReason | undefined {
  if (!state || state.status === 'revoked') return 'invitation_revoked'
  if (state.status === 'accepted') return 'invitation_accepted'
  if (state.status === 'expired' || state.expires_at.getTime() <= now.getTime()) return 'invitation_expired'
  return undefined
}

/** The dead-letter reason for a message that outlived its secret. */
export function expiredReason(purpose: string): DeadLetterReason {
  return purpose === 'invitation' ? 'invitation_expired' : 'challenge_expired'
}
