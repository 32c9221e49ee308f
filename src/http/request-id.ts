import { randomUUID } from 'node:crypto'
import type { RequestHandler } from 'express'
import { requestContext } from '../logging/request-context.ts'

// A router's id (Heroku: 20–200 of these characters) is kept; anything else — too long, line
// breaks, markup — is replaced, so a caller cannot write into our logs through it.
const ACCEPTED = /^[A-Za-z0-9+/=._:-]{1,200}$/

/** Takes X-Request-ID (or makes one), answers with it, and carries it on every log line of the request. */
export function requestId(): RequestHandler {
  return (req, res, next) => {
    const given = req.get('x-request-id')
    const id = given !== undefined && ACCEPTED.test(given) ? given : randomUUID()
    res.locals.requestId = id
    res.set('X-Request-ID', id)
    requestContext.run({ requestId: id }, next)
  }
}
