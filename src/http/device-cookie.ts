import type { Request, Response } from 'express'
import type { DeviceCookie } from '../identity/devices.ts'

/**
 * The device cookie (docs/security.md "Budgets from the owner's side"): set by a successful
 * sign-in or sign-up confirmation, sent back by the client on its next requests as clients already
 * do with cookies. `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends
 * it), `Secure` outside development and tests, path `/`. It grants nothing but budgets of the
 * account's own: a session still needs its bearer token.
 */
export const DEVICE_COOKIE = 'sealpost_device'

// A token is base64url (newToken); anything else is no device, and is never looked up.
const TOKEN = /^[A-Za-z0-9_-]{16,128}$/

/** The device token the request's Cookie header carries, if any well-formed one. */
export function deviceTokenOf(req: Request): string | undefined {
  const header = req.headers.cookie
  if (!header) return undefined
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=')
    if (eq < 0 || pair.slice(0, eq).trim() !== DEVICE_COOKIE) continue
    const value = pair.slice(eq + 1).trim()
    if (TOKEN.test(value)) return value
  }
  return undefined
}

/** Sets the device cookie for the client that just signed in. */
export function setDeviceCookie(res: Response, device: DeviceCookie, secure: boolean, now: Date): void {
  res.cookie(DEVICE_COOKIE, device.token, {
    httpOnly: true,
    sameSite: 'strict',
    secure,
    path: '/',
    maxAge: Math.max(0, device.expiresAt.getTime() - now.getTime()),
  })
}
