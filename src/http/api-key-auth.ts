import type { Request, RequestHandler, Response } from 'express'
import type { Knex } from 'knex'
import { authenticateApiKey, type CourierCaller } from '../platform/api-keys.ts'
import { touchApiKey } from '../platform/api-keys-sql.ts'
import { HttpProblemError } from './problem.ts'

const BEARER = /^bearer +(\S{1,200})$/i

/**
 * Resolves `Authorization: Bearer <api key>` to its caller, or answers one 401 for a missing,
 * malformed, unknown or revoked key (same body, same work: src/platform/api-keys.ts). Each failure
 * is first counted against the client's per-client limit (`failed`: src/http/client-limit.ts), which
 * answers 429 past it; a key that authenticates is never refused by what its network failed.
 */
export function requireApiKey(db: Knex, clock: () => Date, failed?: (req: Request) => Promise<unknown>): RequestHandler {
  return async (req, res, next) => {
    const presented = BEARER.exec(req.get('authorization') ?? '')?.[1] ?? ''
    const caller = await authenticateApiKey(db, presented)
    if (!caller) await failed?.(req)
    if (!caller)
      throw new HttpProblemError(401, 'unauthenticated', 'A valid API key is required.', { headers: { 'WWW-Authenticate': 'Bearer' } })
    res.locals.courierCaller = caller
    await touchApiKey(db, caller.apiKeyId, clock())
    next()
  }
}

export function courierCallerOf(res: Response): CourierCaller {
  return res.locals.courierCaller as CourierCaller
}
