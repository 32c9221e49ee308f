import knex, { type Knex } from 'knex'
import pg from 'pg'

// timestamptz → Date (pg's default) and bigint counts → number: our counts never near 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

/** One knex pool per database identity (owner, api, worker); nothing else opens connections. */
export function createKnex(connectionString: string, options: { applicationName: string; max?: number }): Knex {
  return knex({
    client: 'pg',
    connection: { connectionString, application_name: options.applicationName },
    pool: { min: 0, max: options.max ?? 10 },
    acquireConnectionTimeout: 10_000,
  })
}

/** Same server, another login: used to derive the embedded default's role URLs. */
export function withCredentials(connectionString: string, user: string, password: string): string {
  const url = new URL(connectionString)
  url.username = encodeURIComponent(user)
  url.password = encodeURIComponent(password)
  return url.toString()
}
