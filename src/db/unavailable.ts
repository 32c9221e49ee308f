import type { Knex } from 'knex'
import { describeError, type Logger } from '../logging/logger.ts'
import { SealpostError } from '../errors/sealpost-error.ts'

// SQLSTATE classes 08 (connection exception), 53 (insufficient resources) and 57P (operator
// intervention: admin_shutdown, crash_shutdown, cannot_connect_now, database_dropped).
const UNAVAILABLE_SQLSTATE = /^(08|53|57P)/
const UNAVAILABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
])
// node-postgres and knex raise these without a code when a connection dies or never comes; knex
// prefixes a failed query's message with its SQL and " - " ("COMMIT; - Client has encountered…").
const UNAVAILABLE_MESSAGE =
  /(?:^| - )(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout expired|Knex: Timeout acquiring a connection|Cannot use a pool after calling end|Query read timeout)/

function isUnavailableItself(error: object): boolean {
  const { code, name, message } = error as { code?: unknown; name?: unknown; message?: unknown }
  if (name === 'KnexTimeoutError') return true
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_ERRNO.has(code))) return true
  return typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message)
}

/**
 * True when an error means "no database to talk to right now" — a restart, failover, refused or
 * reset connection, an exhausted pool — whatever shape it reached us in: a pg DatabaseError, a Node
 * system error, an AggregateError of several connection attempts, or an error pg-boss or knex
 * wrapped around one (`cause`, `errors`, `originalError`, or pg-boss's spread copies). Pure.
 */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!error || typeof error !== 'object' || depth > 4) return false
  if (isUnavailableItself(error)) return true
  const {
    cause,
    errors,
    originalError,
    error: inner,
  } = error as { cause?: unknown; errors?: unknown; originalError?: unknown; error?: unknown }
  if (Array.isArray(errors) && errors.some((item) => isDatabaseUnavailable(item, depth + 1))) return true
  return [cause, originalError, inner].some((item) => isDatabaseUnavailable(item, depth + 1))
}

/** The database did not come within the startup bound; its message names the variable, never a value. */
export class DatabaseUnavailableError extends SealpostError {
  override name = 'DatabaseUnavailableError'
}

/**
 * At startup, waits for the database behind `db` instead of exiting on the first refused
 * connection (a platform often starts processes while its database restarts): retries `SELECT 1`
 * with exponential backoff (0.5 s doubling to 5 s), one log line per try, for at most
 * `timeoutSeconds`. Any other failure (a wrong password, a missing database) stops at once.
 */
export async function waitForDatabase(
  db: Knex,
  options: { variable: string; timeoutSeconds: number; logger: Logger; sleep?: (ms: number) => Promise<void>; now?: () => number },
): Promise<void> {
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const now = options.now ?? Date.now
  const started = now()
  for (let attempt = 1; ; attempt++) {
    try {
      await db.raw('SELECT 1')
      if (attempt > 1)
        options.logger.info('database reachable', { variable: options.variable, attempts: attempt, waitedMs: now() - started })
      return
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error
      const retryInMs = Math.min(5_000, 500 * 2 ** (attempt - 1))
      const waitedMs = now() - started
      if (waitedMs + retryInMs > options.timeoutSeconds * 1000) {
        options.logger.error('database unreachable: giving up', {
          variable: options.variable,
          attempts: attempt,
          waitedMs,
          ...describeError(error),
        })
        throw new DatabaseUnavailableError(
          `${options.variable}: the database did not answer within DATABASE_WAIT_SECONDS (${options.timeoutSeconds} s); is it running and reachable?`,
        )
      }
      options.logger.warn('waiting for the database', { variable: options.variable, attempt, retryInMs, ...describeError(error) })
      await sleep(retryInMs)
    }
  }
}
