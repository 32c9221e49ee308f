import { createHash, timingSafeEqual } from 'node:crypto'
import type { CoreConfig } from '../../config/schema.ts'

/**
 * Who may read a metrics endpoint. Counts of messages move with every request a stranger makes
 * (a recovery for a known address adds one, for an unknown one nothing), so they are an account
 * oracle: with METRICS_TOKEN set a scrape needs `Authorization: Bearer <token>`; without it they
 * are served only in development and test, and deployed processes do not serve them at all.
 */
export type MetricsAccess = { tokenDigest?: Buffer; openWithoutToken: boolean }

const digest = (text: string) => createHash('sha256').update(text).digest()

export function metricsAccess(config: Pick<CoreConfig, 'NODE_ENV' | 'METRICS_TOKEN'>): MetricsAccess {
  return {
    tokenDigest: config.METRICS_TOKEN === undefined ? undefined : digest(config.METRICS_TOKEN),
    openWithoutToken: config.NODE_ENV === 'development' || config.NODE_ENV === 'test',
  }
}

/** `allowed`, `unauthenticated` (answer 401) or `not_served` (answer 404, as for no route at all). */
export function decideMetricsAccess(
  access: MetricsAccess,
  authorization: string | undefined,
): 'allowed' | 'unauthenticated' | 'not_served' {
  if (!access.tokenDigest) return access.openWithoutToken ? 'allowed' : 'not_served'
  const presented = /^bearer +(\S{1,512})$/i.exec(authorization ?? '')?.[1]
  // Compared as digests: equal lengths for timingSafeEqual, and nothing learnt from the timing.
  return presented !== undefined && timingSafeEqual(digest(presented), access.tokenDigest) ? 'allowed' : 'unauthenticated'
}
