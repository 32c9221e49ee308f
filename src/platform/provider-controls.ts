import type { Knex } from 'knex'
import { requireElevationTx } from '../identity/elevation.ts'
import { NotFoundError } from '../identity/errors.ts'
import { deliveryEventCountRows, liftChannelPauseTx, liftProviderHoldTx, runningPauseRows } from '../outbox/console-functions-sql.ts'
import { asStaff, type StaffSession } from './outbox-admin.ts'

/** The longest window the delivery-event counts look back over: the events' own retention is longer, the answer stays cheap. */
export const DELIVERY_COUNT_MAX_HOURS = 24 * 30

/** `GET …/delivery-events`: provider events received over the last `hours`, per provider, channel and event. */
export async function deliveryEventCounts(db: Knex, input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date; hours: number }) {
  const since = new Date(input.now.getTime() - input.hours * 3_600_000)
  const counts = await asStaff(() => deliveryEventCountRows(db, input.staff.tokenHash, input.now, since))
  return { since: since.toISOString(), until: input.now.toISOString(), counts }
}

/** `GET …/pauses`: each provider's throttle pause still running, and a whole channel's (from a worker of the previous release). */
export async function channelPauses(db: Knex, input: { staff: Pick<StaffSession, 'tokenHash'>; now: Date }) {
  const rows = await asStaff(() => runningPauseRows(db, input.staff.tokenHash, input.now))
  return {
    items: rows.map((row) => ({
      channel: row.channel,
      provider: row.provider,
      pausedUntil: row.paused_until.toISOString(),
      throttleStreak: row.throttle_streak,
    })),
  }
}

/**
 * `DELETE …/channels/:channel/pause` and `DELETE …/providers/:provider/hold` (staff with a fresh
 * step-up): one transaction checks the elevation, then the staff function ends the channel's pauses
 * (its own and its providers') or marks
 * the provider up, calls the channel's held messages back (`outbox.release_held_jobs`, the step a
 * provider's first successful probe runs) and writes the audit record. 404 when there is none.
 */
export async function liftPause(db: Knex, input: { staff: StaffSession; elevationToken: string | undefined; channel: string; now: Date }) {
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    const result = await asStaff(() => liftChannelPauseTx(trx, input.staff.tokenHash, input.now, input.channel))
    if (!result.lifted) throw new NotFoundError('pause_not_found', 'That channel is not paused.')
    return { released: result.released }
  })
}

export async function liftHold(db: Knex, input: { staff: StaffSession; elevationToken: string | undefined; provider: string; now: Date }) {
  return await db.transaction(async (trx) => {
    await requireElevationTx(trx, input.staff, input.elevationToken, input.now)
    const result = await asStaff(() => liftProviderHoldTx(trx, input.staff.tokenHash, input.now, input.provider))
    if (!result.lifted) throw new NotFoundError('hold_not_found', 'That provider is not held down.')
    return { released: result.released }
  })
}
