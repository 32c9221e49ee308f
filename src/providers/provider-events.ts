/** A non-empty string field of a provider's payload, cut to `max` characters; null otherwise. */
export const text = (value: unknown, max = 100): string | null =>
  typeof value === 'string' && value.length > 0 ? value.slice(0, max) : null
/** The first candidate that reads as a time (an ISO string, or Unix seconds or milliseconds). */
export const date = (...candidates: unknown[]): Date | undefined => {
  for (const candidate of candidates) {
    if (typeof candidate !== 'string' && typeof candidate !== 'number') continue
    // Wasender sends milliseconds on some events and seconds on others.
    const parsed = new Date(typeof candidate === 'number' && candidate < 1e12 ? candidate * 1000 : candidate)
    if (!Number.isNaN(parsed.getTime())) return parsed
  }
  return undefined
}
