import type { CourierOnlyPurpose } from './constants.ts'

/**
 * What the envelope of a `verification_code` or `magic_link` message holds: the caller's secret
 * (its code or its link, and beside a link the code that does the same, `otp`) and the
 * non-secret display name it may give, sealed together so neither needs a column. The four
 * identity purposes sent through the courier hold the bare code, as our own flows' messages do,
 * so every worker that renders those renders these. `otp` is not named `code`: a worker that
 * predates it reads `{link, otp}` as the link alone (it ignores members it does not know) and
 * still sends it, where `{link, code}` would be unreadable to it.
 */
export type CourierBody = { code: string; appName?: string } | { link: string; otp?: string; appName?: string }

export const COURIER_ONLY_PURPOSES: ReadonlySet<string> = new Set<CourierOnlyPurpose>(['verification_code', 'magic_link'])

/** The bytes sealed for a courier-only purpose (the caller wipes them once sealed). */
export function encodeCourierBody(body: CourierBody): Buffer {
  return Buffer.from(JSON.stringify(body), 'utf8')
}

/** The body an envelope of a courier-only purpose opened to; undefined when it is not one. */
export function decodeCourierBody(bytes: Buffer): CourierBody | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString('utf8'))
  } catch {
    return undefined
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined
  const { code, link, otp, appName } = parsed as Record<string, unknown>
  if (appName !== undefined && typeof appName !== 'string') return undefined
  const named = appName === undefined ? {} : { appName }
  if (typeof code === 'string' && link === undefined && otp === undefined) return { code, ...named }
  if (typeof link === 'string' && code === undefined && (otp === undefined || typeof otp === 'string'))
    return { link, ...(otp === undefined ? {} : { otp }), ...named }
  return undefined
}
