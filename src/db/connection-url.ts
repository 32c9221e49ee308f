const LIBPQ_MODES = new Set(['prefer', 'require', 'verify-ca'])

/**
 * node-postgres reads `sslmode=require` (and `prefer`, `verify-ca`) as `verify-full`, unlike psql
 * and every libpq client: a Heroku-style URL with `sslmode=require` against a self-signed server
 * certificate then fails. Sealpost gives these modes their libpq meaning (node-postgres's own
 * `uselibpqcompat=true`): `require` encrypts without verifying (with `sslrootcert`, it checks the
 * chain), `verify-ca` checks the chain, `verify-full` also checks the host name, `no-verify`
 * encrypts without verifying. A URL that sets `uselibpqcompat` itself is left as written.
 * A URL without `sslmode` takes libpq's PGSSLMODE / PGSSLROOTCERT from the environment: Heroku's
 * managed DATABASE_URL carries no sslmode, and PGSSLMODE=require is how one asks for TLS there.
 */
export function withLibpqSslModes(connectionString: string, env: NodeJS.ProcessEnv = process.env): string {
  let url: URL
  try {
    url = new URL(connectionString)
  } catch {
    return connectionString
  }
  if (!url.searchParams.has('sslmode') && env.PGSSLMODE) {
    url.searchParams.set('sslmode', env.PGSSLMODE)
    if (env.PGSSLROOTCERT && !url.searchParams.has('sslrootcert')) url.searchParams.set('sslrootcert', env.PGSSLROOTCERT)
  }
  const mode = url.searchParams.get('sslmode')
  if (mode && LIBPQ_MODES.has(mode) && !url.searchParams.has('uselibpqcompat')) url.searchParams.set('uselibpqcompat', 'true')
  return url.toString()
}
