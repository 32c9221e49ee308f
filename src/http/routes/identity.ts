import type { Router } from 'express'
import type { Knex } from 'knex'
import type { ChallengeDeps } from '../../identity/challenges.ts'
import { completePasswordRecovery, requestPasswordRecovery } from '../../identity/password-recovery.ts'
import { acceptNewPassword, type BreachedPasswordCheck } from '../../identity/password-policy.ts'
import { revokeSession } from '../../identity/sessions-sql.ts'
import { addSignInMethod, confirmSignInMethod, removeSignInMethod } from '../../identity/sign-in-methods.ts'
import { signIn } from '../../identity/sign-in.ts'
import { confirmSignUp, signUp } from '../../identity/sign-up.ts'
import { confirmStepUp, startStepUp } from '../../identity/step-up.ts'
import { requireSession, sessionOf } from '../auth.ts'
import { setDeviceCookie } from '../device-cookie.ts'
import { withMinimumDuration } from '../client-limit.ts'
import { DeviceCookieHeaders } from '../openapi/common.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { localized } from '../locale.ts'
import { anonymousCallers, CODE_LIMITS, codeIdentifierFrom, codeSent, identifierFrom, PASSWORD_REFUSALS } from './identity-callers.ts'
import {
  ConfirmationRequest,
  ElevationCreated,
  SessionCreated,
  SignInMethodAdded,
  IdentifierRequest,
  SignUpConfirmationRequest,
  PasswordRecoveryCompletionRequest,
  SignInRequest,
  SignUpRequest,
  StepUpConfirmationRequest,
  StepUpRequest,
} from '../schemas.ts'

/** Answers to requests that could reveal whether an account exists take at least this long: a second layer behind equal work (docs/architecture.md §7). */
export const ENUMERATION_FLOOR_MS = 150

const iso = (date: Date) => date.toISOString()

/** The API document's description of each route below, in the same order. */
export const identityApi = apiRegistry('Identity', 'Sign-up, sessions, sign-in methods, password recovery and step-up')
const api = {
  signUp: identityApi.add({
    operationId: 'startSignUp',
    method: 'post',
    path: '/sign-ups',
    auth: 'none',
    clientLimited: true,
    summary: 'Start a sign-up: a code goes to the identifier',
    description:
      'The same 202, body and timing whether or not the identifier already has an account (an existing owner gets a password-recovery code instead).',
    body: SignUpRequest,
    success: codeSent,
    problems: { 422: ['invalid_identifier', 'unsupported_phone_number', 'channel_unavailable', ...PASSWORD_REFUSALS], 429: CODE_LIMITS },
  }),
  confirmSignUp: identityApi.add({
    operationId: 'confirmSignUp',
    method: 'post',
    path: '/sign-ups/confirmation',
    auth: 'none',
    clientLimited: true,
    summary: 'Confirm a sign-up with its code and the password of the latest sign-up request; answers a session',
    description:
      "The password must be the one the latest sign-up request for the identifier gave (whoever asked last chose the candidate), so a code alone never activates an account with somebody else's password. A wrong code, a wrong password, an expired or used code, and a code past the identity's daily wrong-code budget all answer the same 422 invalid_code and spend an attempt.",
    body: SignUpConfirmationRequest,
    success: { status: 201, description: 'Signed up and signed in', body: SessionCreated, headers: DeviceCookieHeaders },
    problems: { 409: ['identifier_taken'], 422: ['invalid_identifier', 'unsupported_phone_number', 'invalid_code'] },
  }),
  signIn: identityApi.add({
    operationId: 'signIn',
    method: 'post',
    path: '/sessions',
    auth: 'none',
    clientLimited: true,
    summary: 'Sign in with a verified identifier and the password',
    body: SignInRequest,
    success: { status: 201, description: 'Signed in', body: SessionCreated, headers: DeviceCookieHeaders },
    problems: { 401: ['invalid_credentials'], 422: ['invalid_identifier'] },
  }),
  signOut: identityApi.add({
    operationId: 'signOut',
    method: 'delete',
    path: '/sessions/current',
    auth: 'bearer',
    summary: 'Sign out: the session token stops working',
    success: { status: 204, description: 'Signed out' },
  }),
  addSignInMethod: identityApi.add({
    operationId: 'addSignInMethod',
    method: 'post',
    path: '/sign-in-methods',
    auth: 'elevated',
    summary: 'Add a sign-in method: a code goes to it (needs a fresh step-up of this session)',
    description:
      'An identifier another account verified takes exactly the path of a free one (claim, challenge, resend interval, destination budget, a code to the address), so no answer tells whether it belongs to someone. At most 10 additions an hour per identity.',
    body: IdentifierRequest,
    success: codeSent,
    problems: {
      409: ['identifier_already_added'],
      422: ['invalid_identifier', 'unsupported_phone_number', 'channel_unavailable'],
      429: [...CODE_LIMITS, 'identity_rate_limited'],
    },
  }),
  confirmSignInMethod: identityApi.add({
    operationId: 'confirmSignInMethod',
    method: 'post',
    path: '/sign-in-methods/confirmation',
    auth: 'bearer',
    summary: "Confirm a new sign-in method with its code; the identity's other verified identifiers get a security notice",
    body: ConfirmationRequest,
    success: { status: 201, description: 'Added', body: SignInMethodAdded },
    problems: {
      409: ['identifier_taken'],
      422: ['invalid_identifier', 'unsupported_phone_number', 'invalid_code'],
      429: ['too_many_wrong_codes'],
    },
  }),
  removeSignInMethod: identityApi.add({
    operationId: 'removeSignInMethod',
    method: 'post',
    path: '/sign-in-methods/removals',
    auth: 'elevated',
    summary:
      'Remove a sign-in method (needs a fresh step-up of this session); every verified identifier, the removed one too, gets a security notice',
    description:
      'The primary identifier — the first the identity verified, where step-up codes go — cannot be removed (409). An identifier that is not one of your verified sign-in methods is 404, whether or not another account has it.',
    body: IdentifierRequest,
    success: { status: 204, description: 'Removed: it no longer signs in' },
    problems: { 404: ['sign_in_method_not_found'], 409: ['primary_identifier'], 422: ['invalid_identifier'] },
  }),
  requestPasswordRecovery: identityApi.add({
    operationId: 'requestPasswordRecovery',
    method: 'post',
    path: '/password-recoveries',
    auth: 'none',
    clientLimited: true,
    summary: 'Ask for a recovery code',
    description: 'The same 202, body and timing for unknown identifiers.',
    body: IdentifierRequest,
    success: codeSent,
    problems: { 422: ['invalid_identifier', 'unsupported_phone_number', 'channel_unavailable'], 429: CODE_LIMITS },
  }),
  completePasswordRecovery: identityApi.add({
    operationId: 'completePasswordRecovery',
    method: 'post',
    path: '/password-recoveries/completion',
    auth: 'none',
    clientLimited: true,
    summary:
      'Set a new password with the recovery code; revokes every session and sends a security notice to the other verified identifiers',
    description:
      'A new password the policy refuses (weak_password, breached_password) is refused before the code is looked at: no attempt is spent and the code stays usable.',
    body: PasswordRecoveryCompletionRequest,
    success: { status: 204, description: 'Password changed', headers: DeviceCookieHeaders },
    problems: { 422: ['invalid_identifier', 'unsupported_phone_number', 'invalid_code', ...PASSWORD_REFUSALS] },
  }),
  startStepUp: identityApi.add({
    operationId: 'startStepUp',
    method: 'post',
    path: '/step-ups',
    auth: 'bearer',
    summary: 'Ask for a step-up code (to the primary identifier: the first the identity verified)',
    body: StepUpRequest.unwrap(),
    bodyOptional: true,
    success: codeSent,
    problems: { 409: ['no_verified_identifier'], 429: [...CODE_LIMITS, 'identity_rate_limited'] },
  }),
  confirmStepUp: identityApi.add({
    operationId: 'confirmStepUp',
    method: 'post',
    path: '/step-ups/confirmation',
    auth: 'bearer',
    summary: 'Exchange the step-up code for an elevation token (5 minutes, this session only)',
    body: StepUpConfirmationRequest,
    success: { status: 201, description: 'Elevated', body: ElevationCreated },
    problems: { 422: ['invalid_code'], 429: ['too_many_wrong_codes'] },
  }),
}

export type IdentityRouteOptions = {
  db: Knex
  challenges: ChallengeDeps
  clientLimitPerMinute: number
  /** The device cookie's `Secure` attribute: on in staging and production. */
  secureCookies: boolean
  /** New passwords are looked up in known breaches (BREACHED_PASSWORD_API_URL); unset = not. */
  breachedPasswords?: BreachedPasswordCheck
}

/** The routes anyone may call, whose answers never tell whether an account exists: sign-up, sign-in, password recovery. */
function anonymousRoutes(router: Router, options: IdentityRouteOptions): void {
  const { db, challenges: deps, secureCookies, breachedPasswords } = options
  const { counted, requesterOf } = anonymousCallers(db, deps, options.clientLimitPerMinute)
  route(router, api.signUp, counted, async (req, res) => {
    const body = SignUpRequest.parse(req.body)
    const identifier = codeIdentifierFrom(body.identifier, deps)
    const requester = await requesterOf(req, res)
    // Before anything is looked up: the refusal is the same whether or not the address has an account.
    const password = await acceptNewPassword(body.password, breachedPasswords)
    const { challengeExpiresAt } = await withMinimumDuration(ENUMERATION_FLOOR_MS, () =>
      signUp(db, localized(deps, res), { identifier, password, requester }),
    )
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  route(router, api.confirmSignUp, counted, async (req, res) => {
    const body = SignUpConfirmationRequest.parse(req.body)
    const identifier = codeIdentifierFrom(body.identifier, deps)
    const requester = await requesterOf(req, res)
    // Whether a sign-up is pending for the address must not show in the timing either (idle or not, the work is alike).
    const session = await withMinimumDuration(ENUMERATION_FLOOR_MS, () =>
      confirmSignUp(db, deps, { identifier, code: body.code, password: body.password, requester }),
    )
    setDeviceCookie(res, session.device, secureCookies, deps.clock())
    res.status(201).json({ token: session.token, expiresAt: iso(session.expiresAt) })
  })

  route(router, api.signIn, counted, async (req, res) => {
    const body = SignInRequest.parse(req.body)
    const identifier = identifierFrom(body.identifier)
    const requester = await requesterOf(req, res)
    const session = await signIn(db, deps, { identifier, password: body.password, requester })
    setDeviceCookie(res, session.device, secureCookies, deps.clock())
    res.status(201).json({ token: session.token, expiresAt: iso(session.expiresAt) })
  })

  route(router, api.requestPasswordRecovery, counted, async (req, res) => {
    const body = IdentifierRequest.parse(req.body)
    const identifier = codeIdentifierFrom(body.identifier, deps)
    const requester = await requesterOf(req, res)
    const { challengeExpiresAt } = await withMinimumDuration(ENUMERATION_FLOOR_MS, () =>
      requestPasswordRecovery(db, localized(deps, res), identifier, requester),
    )
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  route(router, api.completePasswordRecovery, counted, async (req, res) => {
    const body = PasswordRecoveryCompletionRequest.parse(req.body)
    const identifier = codeIdentifierFrom(body.identifier, deps)
    const requester = await requesterOf(req, res)
    const newPassword = await acceptNewPassword(body.newPassword, breachedPasswords)
    const device = await withMinimumDuration(ENUMERATION_FLOOR_MS, () =>
      completePasswordRecovery(db, localized(deps, res), { identifier, code: body.code, newPassword, requester }),
    )
    setDeviceCookie(res, device, secureCookies, deps.clock())
    res.status(204).end()
  })
}

/** The routes of a signed-in session: signing out, its sign-in methods, step-up. */
function signedInRoutes(router: Router, { db, challenges: deps }: IdentityRouteOptions): void {
  const signedIn = requireSession(db, deps.clock)
  route(router, api.signOut, signedIn, async (_req, res) => {
    await revokeSession(db, sessionOf(res).sessionId, deps.clock())
    res.status(204).end()
  })

  route(router, api.addSignInMethod, signedIn, async (req, res) => {
    const body = IdentifierRequest.parse(req.body)
    const input = { identifier: codeIdentifierFrom(body.identifier, deps), elevationToken: req.get('x-elevation-token') }
    const { challengeExpiresAt } = await addSignInMethod(db, localized(deps, res), sessionOf(res), input)
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  route(router, api.confirmSignInMethod, signedIn, async (req, res) => {
    const body = ConfirmationRequest.parse(req.body)
    res
      .status(201)
      .json(await confirmSignInMethod(db, deps, sessionOf(res), { identifier: codeIdentifierFrom(body.identifier, deps), code: body.code }))
  })

  route(router, api.removeSignInMethod, signedIn, async (req, res) => {
    const body = IdentifierRequest.parse(req.body)
    await removeSignInMethod(db, localized(deps, res), sessionOf(res), {
      identifier: identifierFrom(body.identifier),
      elevationToken: req.get('x-elevation-token'),
    })
    res.status(204).end()
  })

  route(router, api.startStepUp, signedIn, async (req, res) => {
    StepUpRequest.parse(req.body)
    const { challengeExpiresAt } = await startStepUp(db, localized(deps, res), sessionOf(res))
    res.status(202).json({ challengeExpiresAt: iso(challengeExpiresAt) })
  })

  route(router, api.confirmStepUp, signedIn, async (req, res) => {
    const body = StepUpConfirmationRequest.parse(req.body)
    const elevation = await confirmStepUp(db, deps, sessionOf(res), body.code)
    res.status(201).json({ elevationToken: elevation.elevationToken, expiresAt: iso(elevation.expiresAt) })
  })
}

/** The four security flows and sessions (docs/architecture.md §3): thin routes over the use cases. */
export function identityRoutes(options: IdentityRouteOptions): Router {
  const router = apiRouter()
  anonymousRoutes(router, options)
  signedInRoutes(router, options)
  return router
}
