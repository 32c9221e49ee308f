/**
 * How long a THROTTLED answer pauses its provider for the whole worker fleet (docs/architecture.md §4),
 * as pure functions of the clock and a random source. A pause is the provider's, never its
 * channel's: one SMTP relay's 452 does not stop SES. A provider's Retry-After is obeyed only up to
 * `maxPauseSeconds`: one hostile or buggy `Retry-After: 31536000` must not stop a provider (and
 * expire every code queued behind it) for a year. A throttle without a hint (SES sends none) backs
 * the provider off briefly, growing with each throttle that follows soon after the last pause.
 */
export type PausePolicy = { maxPauseSeconds: number; random: () => number }

export const DEFAULT_MAX_PROVIDER_PAUSE_SECONDS = 300

/** The first hint-less pause, and how soon after a pause ends a new throttle still counts as the same storm. */
export const THROTTLE_BACKOFF = Object.freeze({ baseSeconds: 1, streakWindowSeconds: 60 })

/**
 * Providers that throttle without a hint: SES answers TooManyRequestsException with no
 * Retry-After, and SMTP has no Retry-After at all (a 421 or 452). The HTTP phone providers document
 * Retry-After (Wasender also X-RateLimit-Reset) on their 429s, so a hint-less 429 there keeps the
 * message's own schedule and pauses nobody else.
 */
export const HINTLESS_BACKOFF_PROVIDERS: ReadonlySet<string> = new Set(['ses', 'smtp'])

export const defaultPausePolicy = (): PausePolicy => ({ maxPauseSeconds: DEFAULT_MAX_PROVIDER_PAUSE_SECONDS, random: Math.random })

/** The latest end of a pause any one answer may set. */
export function pauseCeiling(now: Date, policy: Pick<PausePolicy, 'maxPauseSeconds'>): Date {
  return new Date(now.getTime() + policy.maxPauseSeconds * 1000)
}

/** A provider's Retry-After, capped at the ceiling; null when it gave none in the future. */
export function cappedRetryAfter(retryAfterAt: Date | null, now: Date, policy: Pick<PausePolicy, 'maxPauseSeconds'>): Date | null {
  if (!retryAfterAt || !Number.isFinite(retryAfterAt.getTime()) || retryAfterAt.getTime() <= now.getTime()) return null
  return new Date(Math.min(retryAfterAt.getTime(), pauseCeiling(now, policy).getTime()))
}

export type ProviderPause = { pausedUntil: Date; throttleStreak: number }

/**
 * The pause after a THROTTLED answer without Retry-After, given the provider's current pause: none
 * while one still runs (that answer is from a send that began before it); otherwise
 * `base × 2^(streak−1)` seconds, capped, with equal jitter (half fixed, half random), where the
 * streak grows while throttles keep coming within `streakWindowSeconds` of the last pause's end.
 */
export function throttleBackoff(current: ProviderPause | undefined, now: Date, policy: PausePolicy): ProviderPause | null {
  if (current && current.pausedUntil.getTime() > now.getTime()) return null
  const recent =
    current !== undefined &&
    current.throttleStreak > 0 &&
    now.getTime() - current.pausedUntil.getTime() <= THROTTLE_BACKOFF.streakWindowSeconds * 1000
  const throttleStreak = recent ? current.throttleStreak + 1 : 1
  const seconds = Math.min(policy.maxPauseSeconds, THROTTLE_BACKOFF.baseSeconds * 2 ** Math.min(30, throttleStreak - 1))
  const jittered = seconds * (0.5 + 0.5 * Math.min(1, Math.max(0, policy.random())))
  return { pausedUntil: new Date(now.getTime() + Math.max(1, Math.round(jittered * 1000))), throttleStreak }
}
