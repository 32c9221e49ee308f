import type { Request, RequestHandler, Response } from 'express'
import type { Knex } from 'knex'
import { isDatabaseUnavailable } from '../../db/unavailable.ts'
import type { ChallengeDeps } from '../../identity/challenges.ts'
import { resolveRequester } from '../../identity/devices.ts'
import { parseIdentifier, phoneRefusal, type Identifier } from '../../identity/identifiers.ts'
import { offeredChannels } from '../../outbox/channel-routing.ts'
import { DEFAULT_PHONE_NUMBER_POLICY } from '../../outbox/phone-numbers.ts'
import { limitPerClient } from '../client-limit.ts'
import { deviceTokenOf } from '../device-cookie.ts'
import { HttpProblemError } from '../problem.ts'
import { ChallengeAccepted } from '../schemas.ts'

/** The identifier a request names, or 422 `invalid_identifier`. */
export function identifierFrom(raw: string): Identifier {
  const identifier = parseIdentifier(raw)
  if (!identifier)
    throw new HttpProblemError(422, 'invalid_identifier', 'The identifier must be an email address or an E.164 phone number.')
  return identifier
}

/**
 * The identifier a code is to be sent to or confirmed for: `identifierFrom`'s, and then 422
 * `unsupported_phone_number` for a number a code may not go to (not a valid mobile, or outside
 * SMS_ALLOWED_COUNTRIES where SMS is the only phone channel). Judged from the number and the
 * deployment alone, before anything is looked up, so a known and an unknown number get the same
 * answer in the same time.
 */
export function codeIdentifierFrom(raw: string, deps: Pick<ChallengeDeps, 'phoneNumbers' | 'channels' | 'phoneChannels'>): Identifier {
  const identifier = identifierFrom(raw)
  if (phoneRefusal(identifier, deps.phoneNumbers ?? DEFAULT_PHONE_NUMBER_POLICY, offeredChannels(deps)))
    throw new HttpProblemError(422, 'unsupported_phone_number', 'Codes cannot be sent to this phone number.')
  return identifier
}

/**
 * Who calls an anonymous identity route: `counted` counts the client against its per-minute limit,
 * `requesterOf` then names it with its device cookie, for the owner-first budgets.
 */
export function anonymousCallers(db: Knex, deps: ChallengeDeps, clientLimitPerMinute: number) {
  const countClient = limitPerClient(db, deps.codeHashKeys ?? deps.codeHashKey, clientLimitPerMinute, deps.clock, deps.logger)
  // Counted before the body is read: a client that only sends malformed bodies meets the limit too.
  // Without a database the body is still judged (a malformed one is 422, not 503); a valid one waits for the count.
  const counted: RequestHandler = async (req, res, next) => {
    try {
      res.locals.client = await countClient(req)
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error
      res.locals.uncounted = error
    }
    next()
  }
  // The counted client, then its device cookie (looked up whatever the identifier: docs/security.md).
  const requesterOf = async (req: Request, res: Response) => {
    if (res.locals.uncounted) throw res.locals.uncounted
    return await resolveRequester(db, res.locals.client as string, deviceTokenOf(req), deps.clock())
  }
  return { counted, requesterOf }
}

// What a request for a code can be refused with (docs/architecture.md §7, budgets: resends, per-destination budget).
export const CODE_LIMITS = ['rate_limited', 'resend_too_soon', 'too_many_resends'] as const
export const codeSent = { status: 202, description: 'Accepted: a code is on its way (not yet delivered)', body: ChallengeAccepted }
// What a new password can be refused with (src/identity/password-policy.ts): decided by the password alone.
export const PASSWORD_REFUSALS = ['weak_password', 'breached_password'] as const
