import type { Request, RequestHandler, Response } from 'express'
import type { Knex } from 'knex'
import { ForbiddenError, UnauthenticatedError } from '../identity/errors.ts'
import { isActiveStaff } from '../platform/staff.ts'
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

/** After requireSession: the SHA-256 of the caller's session token, which staff SECURITY DEFINER functions verify themselves (DESIGN §7). */
export function sessionTokenHashOf(req: Request): Buffer {
  return hashToken(BEARER.exec(req.get('authorization') ?? '')![1]!)
}

export function sessionOf(res: Response): SessionContext {
  return res.locals.session as SessionContext
}

/** After requireSession: only an active staff member passes; anyone else gets 403 before any outbox row is read. */
export function requireStaff(db: Knex): RequestHandler {
  return async (_req, res, next) => {
    if (!(await isActiveStaff(db, sessionOf(res).identityId))) throw new ForbiddenError('not_staff', 'Only staff may do this.')
    next()
  }
}
