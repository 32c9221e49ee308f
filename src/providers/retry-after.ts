/** Parses a Retry-After header (delta-seconds or HTTP-date) against `now`; null when unusable. */
export function parseRetryAfter(value: string | null | undefined, now: Date): Date | null {
  if (!value) return null
  const text = value.trim()
  if (/^\d+$/.test(text)) return new Date(now.getTime() + Number(text) * 1000)
  const date = new Date(text)
  if (!Number.isFinite(date.getTime()) || !/[a-z]/i.test(text)) return null
  return date.getTime() > now.getTime() ? date : null
}

/** Wasender's `X-RateLimit-Reset`: Unix seconds when the window reopens; null when past or invalid. */
export function parseRateLimitReset(value: string | null | undefined, now: Date): Date | null {
  if (!value || !/^\d+$/.test(value.trim())) return null
  const date = new Date(Number(value.trim()) * 1000)
  return date.getTime() > now.getTime() ? date : null
}

/** The later of the provider's hints, or null when it gave none usable. */
export function providerRetryAt(headers: { retryAfter?: string | null; rateLimitReset?: string | null }, now: Date): Date | null {
  const hints = [parseRetryAfter(headers.retryAfter, now), parseRateLimitReset(headers.rateLimitReset, now)].filter(
    (date): date is Date => date !== null,
  )
  return hints.length === 0 ? null : new Date(Math.max(...hints.map((date) => date.getTime())))
}
