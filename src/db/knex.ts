import { createHash } from 'node:crypto'
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
export function createKnex(
  connectionString: string,
  options: { applicationName: string; max?: number; logger?: Logger; lockTimeoutMs?: number },
): Knex {
  const log = (level: 'warn' | 'debug') => (detail: unknown) =>
    options.logger?.[level]('knex', typeof detail === 'string' ? { detail: detail.slice(0, 200) } : describeError(detail))
  return knex({
    client: 'pg',
    connection: { connectionString: withLibpqSslModes(connectionString), application_name: options.applicationName },
    pool: {
      min: 0,
      max: options.max ?? 10,
      // A wait for a lock ends with 55P03 after this long instead of queueing traffic behind it (the release step).
      ...(options.lockTimeoutMs === undefined
        ? {}
        : {
            afterCreate: (connection: pg.Client, done: (error: Error | undefined, connection: pg.Client) => void) =>
              void connection.query(`SET lock_timeout = ${Math.round(options.lockTimeoutMs!)}`).then(
                () => done(undefined, connection),
                (error: Error) => done(error, connection),
              ),
          }),
    },
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

const statementNames = new Map<string, { generation: number; name: string }>()
/** Bumped when a migration changed what a prepared statement returns: every connection prepares anew. */
let statementGeneration = 0

/** The name `preparedRaw` prepares this text under, now. */
export const statementName = (sql: string): string => {
  const known = statementNames.get(sql)
  if (known?.generation === statementGeneration) return known.name
  const name = `sealpost_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}_${statementGeneration}`
  statementNames.set(sql, { generation: statementGeneration, name })
  return name
}

/**
 * PostgreSQL refuses a prepared statement whose result columns changed type since it was prepared
 * ("cached plan must not change result type", SQLSTATE 0A000 from its RevalidateCachedQuery): told
 * by the routine, which a server's `lc_messages` does not translate, or by the English text.
 */
const resultTypeChanged = (error: unknown): boolean => {
  const { code, routine, message } = error as { code?: string; routine?: string; message?: string }
  return code === '0A000' && (routine === 'RevalidateCachedQuery' || /cached plan must not change result type/.test(message ?? ''))
}

/**
 * A statement that runs often (the worker's claim and record): a named prepared statement, so each
 * connection parses and plans it once and PostgreSQL may keep its generic plan, instead of
 * planning it at every call (planning costs the claim more than running it; docs/performance.md). The
 * name is a digest of the text, so two texts never share one; `sql` must be a fixed text (the
 * values go in `bindings`), or every variant would stay prepared on the connection.
 *
 * A migration that changes the type of a column the statement returns (the release step runs while
 * the old workers still do) makes PostgreSQL refuse it on every connection that prepared it, for
 * good. Then every connection prepares it again under a new name; the call is retried once, unless
 * it ran in a transaction, which the refusal aborted: its caller retries as for any failed commit.
 */
export async function preparedRaw<T>(runner: Knex | Knex.Transaction, sql: string, bindings: readonly Knex.RawBinding[]): Promise<T> {
  try {
    return (await runner.raw(sql, bindings).options({ name: statementName(sql) })) as T
  } catch (error) {
    if (!resultTypeChanged(error)) throw error
    statementGeneration += 1
    if ((runner as Knex.Transaction).isTransaction) throw error
    return (await runner.raw(sql, bindings).options({ name: statementName(sql) })) as T
  }
}
