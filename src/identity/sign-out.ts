import type { Knex } from 'knex'
import { deleteDevicesOfIdentityTx } from './devices-sql.ts'
import { requireElevationTx } from './elevation.ts'
import type { SessionContext } from './sessions.ts'
import { revokeAllSessionsTx } from './sessions-sql.ts'

// The step-up actions on what keeps an account signed in: its sessions and its trusted devices.

/**
 * DELETE /sessions, "sign out everywhere", with a fresh step-up of this very session: every session
 * of the identity stops working, this one too. A bearer token alone is not enough: a stolen session
 * would sign the owner out. The trusted devices stay (`forgetDevices` is a step-up action of its
 * own), so whoever signs out everywhere does not also make the owner's clients strangers to the
 * budgets (docs/security.md "Security properties").
 */
export async function signOutEverywhere(db: Knex, session: SessionContext, elevationToken: string | undefined, now: Date): Promise<void> {
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, session, elevationToken, now)
    await revokeAllSessionsTx(trx, session.identityId, now)
  })
}

/** DELETE /devices, with a fresh step-up of this session: every trusted device of the identity is forgotten; the sessions go on. */
export async function forgetDevices(db: Knex, session: SessionContext, elevationToken: string | undefined, now: Date): Promise<void> {
  await db.transaction(async (trx) => {
    await requireElevationTx(trx, session, elevationToken, now)
    await deleteDevicesOfIdentityTx(trx, session.identityId)
  })
}
