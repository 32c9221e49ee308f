import knex, { type Knex } from 'knex'
import pg from 'pg'
import { describeError, type Logger } from '../logging/logger.ts'
import { withLibpqSslModes } from './connection-url.ts'

// timestamptz → Date (pg's default) and bigint counts → number: our counts never near 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

/**
 * One knex pool per database identity (owner, api, worker); nothing else opens connections.
 * knex would print connection errors to the console itself; they are thrown to the caller anyway,
 * so here they only reach our logger, by kind, through its redaction.
 */
export function createKnex(connectionString: string, options: { applicationName: string; max?: number; logger?: Logger }): Knex {
  const log = (level: 'warn' | 'debug') => (detail: unknown) =>
    options.logger?.[level]('knex', typeof detail === 'string' ? { detail: detail.slice(0, 200) } : describeError(detail))
  return knex({
    client: 'pg',
    connection: { connectionString: withLibpqSslModes(connectionString), application_name: options.applicationName },
    pool: { min: 0, max: options.max ?? 10 },
    acquireConnectionTimeout: 10_000,
    log: { warn: log('warn'), error: log('debug'), deprecate: log('warn'), debug: log('debug') },
  })
}

/** Same server, another login: used to derive the embedded default's role URLs. */
export function withCredentials(connectionString: string, user: string, password: string): string {
  const url = new URL(connectionString)
  url.username = encodeURIComponent(user)
  url.password = encodeURIComponent(password)
  return url.toString()
}
