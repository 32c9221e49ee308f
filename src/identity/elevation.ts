import type { Knex } from 'knex'
import { ForbiddenError } from './errors.ts'
import { hashToken } from './secrets.ts'
import { findLiveElevationTx } from './sessions-sql.ts'
import type { SessionContext } from './sessions.ts'

/**
 * Refuses (403 `elevation_required`) unless `token` is a live step-up elevation of this very
 * session: a bearer token alone, or an elevation of another session, is not enough for the
 * changes that would make a stolen session permanent or act as staff.
 */
export async function requireElevationTx(
  trx: Knex.Transaction,
  session: SessionContext,
  token: string | undefined,
  now: Date,
): Promise<void> {
  const elevation = token && token.length <= 128 ? await findLiveElevationTx(trx, session, hashToken(token), now) : undefined
  if (!elevation) throw new ForbiddenError('elevation_required', 'A fresh elevation token from step-up is required (X-Elevation-Token).')
}
