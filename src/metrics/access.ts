import type { CoreConfig } from '../../config/schema.ts'
import { sameSecret } from '../crypto/constant-time.ts'

/**
 * Who may read a metrics endpoint. Counts of messages move with every request a stranger makes
 * (a recovery for a known address adds one, for an unknown one nothing), so they are an account
 * oracle: with METRICS_TOKEN set a scrape needs `Authorization: Bearer <token>`; without it they
 * are served only in development and test, and deployed processes do not serve them at all.
 */
export type MetricsAccess = { token?: string; openWithoutToken: boolean }

export function metricsAccess(config: Pick<CoreConfig, 'NODE_ENV' | 'METRICS_TOKEN'>): MetricsAccess {
  return {
    token: config.METRICS_TOKEN,
    openWithoutToken: config.NODE_ENV === 'development' || config.NODE_ENV === 'test',
  }
}

/** `allowed`, `unauthenticated` (answer 401) or `not_served` (answer 404, as for no route at all). */
export function decideMetricsAccess(
  access: MetricsAccess,
  authorization: string | undefined,
): 'allowed' | 'unauthenticated' | 'not_served' {
  if (access.token === undefined) return access.openWithoutToken ? 'allowed' : 'not_served'
  const presented = /^bearer +(\S{1,512})$/i.exec(authorization ?? '')?.[1]
  return presented !== undefined && sameSecret(presented, access.token) ? 'allowed' : 'unauthenticated'
}
