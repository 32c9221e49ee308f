import { execFileSync } from 'node:child_process'
import { chown, copyFile, mkdtemp, stat, writeFile, chmod } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import pg from 'pg'

/** A CA and a server certificate it signed for 127.0.0.1 / localhost, made with openssl for this test. */
export type TestCertificates = { dir: string; caCert: string; serverCert: string; serverKey: string }

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' })
}

export async function makeCertificates(commonName = 'Sealpost test CA'): Promise<TestCertificates> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sealpost-tls-'))
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${commonName}`, '-keyout', 'ca.key', '-out', 'ca.crt'],
    dir,
  )
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr'], dir)
  await writeFile(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  openssl(
    [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      'san.ext',
      '-out',
      'server.crt',
    ],
    dir,
  )
  return { dir, caCert: path.join(dir, 'ca.crt'), serverCert: path.join(dir, 'server.crt'), serverKey: path.join(dir, 'server.key') }
}

/**
 * Turns a running cluster TLS-only: the certificate and key into its data directory (owned by
 * whoever owns that directory: the `postgres` user under root), `ssl = on`, and a pg_hba.conf of
 * `hostssl` lines alone, applied by a reload. A connection without TLS is refused from then on.
 */
export async function requireTls(databaseDir: string, superuserUrl: string, certificates: TestCertificates): Promise<void> {
  const owner = await stat(databaseDir)
  for (const [from, name] of [
    [certificates.serverCert, 'server.crt'],
    [certificates.serverKey, 'server.key'],
  ] as const) {
    const to = path.join(databaseDir, name)
    await copyFile(from, to)
    await chmod(to, 0o600)
    await chown(to, owner.uid, owner.gid)
  }
  await writeFile(
    path.join(databaseDir, 'pg_hba.conf'),
    'hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n',
  )
  const client = new pg.Client({ connectionString: superuserUrl })
  await client.connect()
  try {
    await client.query(`ALTER SYSTEM SET ssl = on`)
    await client.query(`ALTER SYSTEM SET ssl_cert_file = 'server.crt'`)
    await client.query(`ALTER SYSTEM SET ssl_key_file = 'server.key'`)
    await client.query('SELECT pg_reload_conf()')
  } finally {
    await client.end()
  }
}

/** The same URL with libpq-style TLS parameters. */
export function withSsl(url: string, params: Record<string, string>): string {
  const parsed = new URL(url)
  for (const [key, value] of Object.entries(params)) parsed.searchParams.set(key, value)
  return parsed.toString()
}
