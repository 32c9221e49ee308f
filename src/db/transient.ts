import type { Knex } from 'knex'
import { describeError, type Logger } from '../logging/logger.ts'
import { isDatabaseUnavailable } from './unavailable.ts'

/**
 * Errors that say nothing about the request, only about this moment: another transaction won a
 * conflict (40001 serialization_failure, 40P01 deadlock_detected), a lock or statement timeout
 * ended a wait (55P03 lock_not_available, 57014 query_canceled), or there is no database right now
 * (src/db/unavailable.ts: classes 08, 53, 57P and the driver's own shapes). Migration
 * 20261202001000 re-raises the same SQLSTATEs from `identity.issue_challenge`'s hidden mode.
 */
const CONFLICT_SQLSTATES = new Set(['40001', '40P01', '55P03', '57014'])

/** True when another attempt in a new transaction may succeed; answered 503 + Retry-After (src/http/problem.ts) when none did. */
export function isTransientDatabaseError(error: unknown): boolean {
  const { code } = (error ?? {}) as { code?: unknown }
  return (typeof code === 'string' && CONFLICT_SQLSTATES.has(code)) || isDatabaseUnavailable(error)
}

/** How often and after how long a wait an attempt is made again. */
export type RetryPolicy = { readonly attempts: number; readonly minDelayMs: number; readonly maxDelayMs: number }

/** A request's: small, since the caller is still waiting, and a database that fails three times in a row is not having a moment. */
export const TRANSIENT_RETRY: RetryPolicy = Object.freeze({ attempts: 3, minDelayMs: 20, maxDelayMs: 80 })

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Runs `attempt` — which opens its own transaction(s) on `db` — again after a transient database
 * error, up to the policy's attempts in all (TRANSIENT_RETRY unless given), with a short jittered wait (so two requests that
 * deadlocked each other do not meet again), then throws the last error. A caller's transaction
 * cannot be retried from inside it: given one, `attempt` runs once and its owner decides. A pool
 * that gave no connection in time (KnexTimeoutError) is not retried: another try would only queue
 * again. Logged by error name and code, once per retry.
 */
export async function withTransientRetry<T>(
  db: Knex | Knex.Transaction,
  attempt: (db: Knex | Knex.Transaction) => Promise<T>,
  options: { logger?: Logger; what: string; policy?: RetryPolicy; sleep?: (ms: number) => Promise<void> },
): Promise<T> {
  if ((db as Knex.Transaction).isTransaction) return await attempt(db)
  const sleep = options.sleep ?? pause
  const policy = options.policy ?? TRANSIENT_RETRY
  for (let tries = 1; ; tries++) {
    try {
      return await attempt(db)
    } catch (error) {
      const retryable = isTransientDatabaseError(error) && (error as { name?: unknown }).name !== 'KnexTimeoutError'
      if (!retryable || tries >= policy.attempts) throw error
      const { minDelayMs, maxDelayMs } = policy
      const delayMs = Math.round(minDelayMs + Math.random() * (maxDelayMs - minDelayMs))
      options.logger?.warn('transient database error: retrying', { what: options.what, attempt: tries, delayMs, ...describeError(error) })
      await sleep(delayMs)
    }
  }
}
