import type { RequestHandler, Response } from 'express'
import type { Knex } from 'knex'
import { ForbiddenError, UnauthenticatedError } from '../identity/errors.ts'
import { isActiveStaff } from '../platform/staff.ts'
import { hashToken } from '../identity/secrets.ts'
import { resolveSession, type SessionContext } from '../identity/sessions.ts'
import type { StaffSession } from '../platform/outbox-admin.ts'

// The scheme is case-insensitive (RFC 9110 §11.1): `bearer`, `BEARER` and `Bearer` are one.
const BEARER = /^bearer +([A-Za-z0-9_-]{16,128})$/i

/** Resolves `Authorization: Bearer <session token>` to the caller (a live session, now marked used), or answers 401. */
export function requireSession(db: Knex, clock: () => Date): RequestHandler {
  return async (req, res, next) => {
    const match = BEARER.exec(req.get('authorization') ?? '')
    const tokenHash = match ? hashToken(match[1]!) : undefined
    const session = tokenHash ? await resolveSession(db, tokenHash, clock()) : undefined
    if (!session) throw new UnauthenticatedError()
    res.locals.session = { sessionId: session.id, identityId: session.identity_id } satisfies SessionContext
    res.locals.sessionTokenHash = tokenHash
    next()
  }
}

export function sessionOf(res: Response): SessionContext {
  return res.locals.session as SessionContext
}

/**
 * The caller's session as staff functions take it: the SHA-256 of the bearer token, which the
 * database checks against a live staff session itself (docs/architecture.md §6), besides the resolved ids.
 */
export function staffSessionOf(res: Response): StaffSession {
  return { ...sessionOf(res), tokenHash: res.locals.sessionTokenHash as Buffer }
}

/** After requireSession: only an active staff member passes; anyone else gets 403 before any outbox row is read. */
export function requireStaff(db: Knex): RequestHandler {
  return async (_req, res, next) => {
    if (!(await isActiveStaff(db, sessionOf(res).identityId))) throw new ForbiddenError('not_staff', 'Only staff may do this.')
    next()
  }
}
