const LIBPQ_MODES = new Set(['prefer', 'require', 'verify-ca'])

/**
 * node-postgres reads `sslmode=require` (and `prefer`, `verify-ca`) as `verify-full`, unlike psql
 * and every libpq client: a Heroku-style URL with `sslmode=require` against a self-signed server
 * certificate then fails. Sealpost gives these modes their libpq meaning (node-postgres's own
 * `uselibpqcompat=true`): `require` encrypts without verifying (with `sslrootcert`, it checks the
 * chain), `verify-ca` checks the chain, `verify-full` also checks the host name, `no-verify`
 * encrypts without verifying. A URL that sets `uselibpqcompat` itself is left as written.
 */
export function withLibpqSslModes(connectionString: string): string {
  let url: URL
  try {
    url = new URL(connectionString)
  } catch {
    return connectionString
  }
  const mode = url.searchParams.get('sslmode')
  if (!mode || !LIBPQ_MODES.has(mode) || url.searchParams.has('uselibpqcompat')) return connectionString
  url.searchParams.set('uselibpqcompat', 'true')
  return url.toString()
}
