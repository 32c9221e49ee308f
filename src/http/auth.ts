import type { RequestHandler, Response } from 'express'
import type { Knex } from 'knex'
import { UnauthenticatedError } from '../identity/errors.ts'
import { hashToken } from '../identity/secrets.ts'
import { findActiveSession } from '../identity/sessions-sql.ts'
import type { SessionContext } from '../identity/sessions.ts'

const BEARER = /^Bearer ([A-Za-z0-9_-]{16,128})$/

/** Resolves `Authorization: Bearer <session token>` to the caller, or answers 401. */
export function requireSession(db: Knex, clock: () => Date): RequestHandler {
  return async (req, res, next) => {
    const match = BEARER.exec(req.get('authorization') ?? '')
    const session = match ? await findActiveSession(db, hashToken(match[1]!), clock()) : undefined
    if (!session) throw new UnauthenticatedError()
    res.locals.session = { sessionId: session.id, identityId: session.identity_id } satisfies SessionContext
    next()
  }
}

export function sessionOf(res: Response): SessionContext {
  return res.locals.session as SessionContext
}
