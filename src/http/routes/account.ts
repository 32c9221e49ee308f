import type { Router } from 'express'
import type { Knex } from 'knex'
import type { ChallengeDeps } from '../../identity/challenges.ts'
import { changePassword } from '../../identity/password-change.ts'
import { acceptNewPassword, type BreachedPasswordCheck } from '../../identity/password-policy.ts'
import { listSessions } from '../../identity/sessions.ts'
import { forgetDevices, signOutEverywhere } from '../../identity/sign-out.ts'
import { requireSession, sessionOf } from '../auth.ts'
import { setDeviceCookie } from '../device-cookie.ts'
import { DeviceCookieHeaders } from '../openapi/common.ts'
import { localized } from '../locale.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { PasswordChangeRequest, SessionList } from '../schemas.ts'

/** The API document's description of each route below, in the same order. */
export const accountApi = apiRegistry('Account', "The signed-in caller's own sessions and password")
const api = {
  listSessions: accountApi.add({
    operationId: 'listSessions',
    method: 'get',
    path: '/sessions',
    auth: 'bearer',
    summary: 'The live sessions of the caller (neither revoked, expired nor idle), newest first',
    success: { status: 200, description: 'The sessions', body: SessionList },
  }),
  signOutEverywhere: accountApi.add({
    operationId: 'signOutEverywhere',
    method: 'delete',
    path: '/sessions',
    auth: 'elevated',
    summary: 'Sign out everywhere (a fresh step-up of this session): every session of the caller stops working, this one too',
    description: 'The trusted devices stay trusted: forgetting them is DELETE /devices, a step-up action of its own.',
    success: { status: 204, description: 'Signed out everywhere' },
  }),
  forgetDevices: accountApi.add({
    operationId: 'forgetDevices',
    method: 'delete',
    path: '/devices',
    auth: 'elevated',
    summary:
      "Forget every trusted device (a fresh step-up of this session): the caller's clients spend the budgets strangers share until they sign in again; the sessions go on",
    success: { status: 204, description: 'Forgotten' },
  }),
  changePassword: accountApi.add({
    operationId: 'changePassword',
    method: 'post',
    path: '/password-changes',
    auth: 'elevated',
    summary:
      'Change the password: the current one and a fresh step-up of this session; revokes every other session and sends a security notice to every verified identifier',
    description:
      'At most 5 attempts an hour per identity, right or wrong; a wrong current password answers 403 wrong_password and changes nothing.',
    body: PasswordChangeRequest,
    success: {
      status: 204,
      description: 'Password changed; this client is trusted anew (every device was forgotten)',
      headers: DeviceCookieHeaders,
    },
    problems: { 403: ['wrong_password'], 422: ['weak_password', 'breached_password'], 429: ['identity_rate_limited'] },
  }),
}

/** The caller's own account: sessions (ASVS 3.3.4) and the password (ASVS 2.1.5), thin routes over src/identity/. */
export function accountRoutes({
  db,
  challenges: deps,
  breachedPasswords,
  secureCookies,
}: {
  db: Knex
  challenges: ChallengeDeps
  breachedPasswords?: BreachedPasswordCheck
  /** The device cookie's `Secure` attribute: on in staging and production. */
  secureCookies: boolean
}): Router {
  const router = apiRouter()
  const signedIn = requireSession(db, deps.clock)

  route(router, api.listSessions, signedIn, async (_req, res) => {
    const sessions = await listSessions(db, sessionOf(res), deps.clock())
    res.json({
      sessions: sessions.map((s) => ({
        id: s.id,
        createdAt: s.createdAt.toISOString(),
        lastUsedAt: s.lastUsedAt.toISOString(),
        expiresAt: s.expiresAt.toISOString(),
        current: s.current,
      })),
    })
  })

  route(router, api.signOutEverywhere, signedIn, async (req, res) => {
    await signOutEverywhere(db, sessionOf(res), req.get('x-elevation-token'), deps.clock())
    res.status(204).end()
  })

  route(router, api.forgetDevices, signedIn, async (req, res) => {
    await forgetDevices(db, sessionOf(res), req.get('x-elevation-token'), deps.clock())
    res.status(204).end()
  })

  route(router, api.changePassword, signedIn, async (req, res) => {
    const body = PasswordChangeRequest.parse(req.body)
    const newPassword = await acceptNewPassword(body.newPassword, breachedPasswords)
    const device = await changePassword(db, localized(deps, res), sessionOf(res), {
      currentPassword: body.currentPassword,
      newPassword,
      elevationToken: req.get('x-elevation-token'),
    })
    setDeviceCookie(res, device, secureCookies, deps.clock())
    res.status(204).end()
  })

  return router
}
