import { Router } from 'express'
import type { Knex } from 'knex'
import type { ChallengeDeps } from '../../identity/challenges.ts'
import { parseIdentifier, type Identifier } from '../../identity/identifiers.ts'
import { completePasswordRecovery, requestPasswordRecoveryTx } from '../../identity/password-recovery.ts'
import { revokeSession } from '../../identity/sessions-sql.ts'
import { addSignInMethod, confirmSignInMethod } from '../../identity/sign-in-methods.ts'
import { signIn } from '../../identity/sign-in.ts'
import { confirmSignUp, signUp } from '../../identity/sign-up.ts'
import { confirmStepUp, startStepUp } from '../../identity/step-up.ts'
import { requireSession, sessionOf } from '../auth.ts'
import { limitPerClient, withMinimumDuration } from '../client-limit.ts'
import { HttpProblem } from '../problem.ts'
import { localized } from '../locale.ts'
import {
  ConfirmationRequest,
  IdentifierRequest,
  PasswordRecoveryCompletionRequest,
  SignInRequest,
  SignUpRequest,
  StepUpConfirmationRequest,
  StepUpRequest,
} from '../schemas.ts'

/** Answers to requests that could reveal whether an account exists take at least this long (OX-S3). */
export const ENUMERATION_FLOOR_MS = 150

function identifierFrom(raw: string): Identifier {
  const identifier = parseIdentifier(raw)
  if (!identifier) throw new HttpProblem(422, 'invalid_identifier', 'The identifier must be an email address or an E.164 phone number.')
  return identifier
}

const iso = (date: Date) => date.toISOString()

export type IdentityRouteOptions = { db: Knex; challenges: ChallengeDeps; clientLimitPerMinute: number }

/** The four security flows and sessions (DESIGN §8): thin routes over the use cases. */
export function identityRoutes({ db, challenges: deps, clientLimitPerMinute }: IdentityRouteOptions): Router {
  const router = Router()
  const countClient = limitPerClient(db, deps.codeHashKey, clientLimitPerMinute, deps.clock)
  const signedIn = requireSession(db, deps.clock)

  router.post('/sign-ups', async (req, res) => {
    const body = SignUpRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    await countClient(req)
    const { challengeExpiresAt } = await withMinimumDuration(ENUMERATION_FLOOR_MS, () => signUp(db, localized(deps, res), { identifier, password: body.password }))
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  router.post('/sign-ups/confirmation', async (req, res) => {
    const body = ConfirmationRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    await countClient(req)
    const session = await confirmSignUp(db, deps, { identifier, code: body.code })
    res.status(201).json({ token: session.token, expiresAt: iso(session.expiresAt) })
  })

  router.post('/sessions', async (req, res) => {
    const body = SignInRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    await countClient(req)
    const session = await signIn(db, deps.clock, { identifier, password: body.password })
    res.status(201).json({ token: session.token, expiresAt: iso(session.expiresAt) })
  })

  router.delete('/sessions/current', signedIn, async (_req, res) => {
    await revokeSession(db, sessionOf(res).sessionId, deps.clock())
    res.status(204).end()
  })

  router.post('/sign-in-methods', signedIn, async (req, res) => {
    const body = IdentifierRequest.parse(req.body)
    const { challengeExpiresAt } = await addSignInMethod(db, localized(deps, res), sessionOf(res), identifierFrom(body.identifier))
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  router.post('/sign-in-methods/confirmation', signedIn, async (req, res) => {
    const body = ConfirmationRequest.parse(req.body)
    res.status(201).json(await confirmSignInMethod(db, deps, sessionOf(res), { identifier: identifierFrom(body.identifier), code: body.code }))
  })

  router.post('/password-recoveries', async (req, res) => {
    const body = IdentifierRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    await countClient(req)
    const { challengeExpiresAt } = await withMinimumDuration(ENUMERATION_FLOOR_MS, () => db.transaction((trx) => requestPasswordRecoveryTx(trx, localized(deps, res), identifier)))
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  router.post('/password-recoveries/completion', async (req, res) => {
    const body = PasswordRecoveryCompletionRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    await countClient(req)
    await completePasswordRecovery(db, deps, { identifier, code: body.code, newPassword: body.newPassword })
    res.status(204).end()
  })

  router.post('/step-ups', signedIn, async (req, res) => {
    StepUpRequest.parse(req.body)
    const { challengeExpiresAt } = await startStepUp(db, localized(deps, res), sessionOf(res))
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  router.post('/step-ups/confirmation', signedIn, async (req, res) => {
    const body = StepUpConfirmationRequest.parse(req.body)
    const elevation = await confirmStepUp(db, deps, sessionOf(res), body.code)
    res.status(201).json({ elevationToken: elevation.elevationToken, expiresAt: iso(elevation.expiresAt) })
  })

  return router
}
