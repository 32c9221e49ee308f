import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { newToken } from '../src/identity/secrets.ts'
import { loopbackClients, percentile } from './measure.ts'
import { spawnProcess, type BenchStack } from './stack.ts'

/** The three routes whose answer could depend on whether an identifier belongs to someone. */
export const ENUMERATION_FLOWS = ['POST /password-recoveries', 'POST /sign-ups', 'POST /sign-in-methods'] as const
export type EnumerationFlow = (typeof ENUMERATION_FLOWS)[number]

export type SideTimings = { p50: number; p90: number }
export type EnumerationResult = { known: SideTimings; unknown: SideTimings; non202: number }

/**
 * Latency of a route for identifiers that belong to someone and for identifiers that do not,
 * `perSide` of each counted, interleaved (known, unknown, known…) and sent by `concurrency` clients
 * at once against a production web process, after a warm-up of the same requests. Each client connects from its own loopback address
 * (127.0.0.2, .3, …), as distinct clients behind no proxy would, so the per-client limit's bucket
 * is not one lock every request queues on: queueing there would make both sides equal for the
 * wrong reason. Sign-in-method callers are distinct stepped-up identities (one request each).
 */
export async function enumerationTiming(
  stack: BenchStack,
  flow: EnumerationFlow,
  options: { concurrency: number; perSide: number },
): Promise<EnumerationResult> {
  // The first `warmup` requests (as interleaved) warm the fresh web process up and are not counted,
  // as the HTTP row's first 2 s: V8 still compiling adds spread to both sides' first requests.
  const warmup = 2 * Math.max(10, options.concurrency)
  const pairs = options.perSide + warmup / 2
  const known = await stack.seedEmailIdentities(pairs)
  const unknown = Array.from({ length: pairs }, () => `nobody-${randomBytes(6).toString('hex')}@example.com`)
  const callers = flow === 'POST /sign-in-methods' ? await seedElevatedCallers(stack, pairs * 2) : []
  const web = await spawnProcess('web', stack.environment({ CLIENT_RATE_LIMIT_PER_MINUTE: '1000000' }))
  const clients = loopbackClients(web.url!, options.concurrency)
  const pools = Array.from({ length: options.concurrency }, (_, i) => clients.pool(i))
  const samples = { known: [] as number[], unknown: [] as number[] }
  let non202 = 0
  const requests = known.flatMap((identifier, i) => [
    { side: 'known' as const, identifier },
    { side: 'unknown' as const, identifier: unknown[i]! },
  ])
  let next = 0
  try {
    await Promise.all(
      pools.map(async (pool) => {
        while (next < requests.length) {
          const n = next++
          const { side, identifier } = requests[n]!
          const body = flow === 'POST /sign-ups' ? { identifier, password: 'a long enough password' } : { identifier }
          const headers: Record<string, string> = { 'content-type': 'application/json', ...(callers[n] ?? {}) }
          const started = performance.now()
          const response = await pool.request({ method: 'POST', path: flow.slice('POST '.length), headers, body: JSON.stringify(body) })
          await response.body.dump()
          if (n >= warmup) samples[side].push(performance.now() - started)
          if (response.statusCode !== 202) non202 += 1
        }
      }),
    )
  } finally {
    await clients.close()
    await web.stop()
  }
  const side = (values: number[]) => ({ p50: percentile(values, 50), p90: percentile(values, 90) })
  return { known: side(samples.known), unknown: side(samples.unknown), non202 }
}

/** `count` active identities, each with a session and a live step-up elevation: the headers each sends. */
async function seedElevatedCallers(stack: BenchStack, count: number): Promise<Record<string, string>[]> {
  const now = Date.now()
  const rows = Array.from({ length: count }, () => ({
    identityId: uuidv7(),
    sessionId: uuidv7(),
    session: newToken(),
    elevation: newToken(),
  }))
  await stack.owner.transaction(async (trx) => {
    for (let start = 0; start < rows.length; start += 500) {
      const batch = rows.slice(start, start + 500)
      await trx('identity.identities').insert(batch.map((row) => ({ id: row.identityId, status: 'active' })))
      await trx('identity.sessions').insert(
        batch.map((row) => ({
          id: row.sessionId,
          identity_id: row.identityId,
          token_hash: row.session.hash,
          expires_at: new Date(now + 3_600_000),
        })),
      )
      await trx('identity.elevations').insert(
        batch.map((row) => ({
          id: uuidv7(),
          identity_id: row.identityId,
          session_id: row.sessionId,
          token_hash: row.elevation.hash,
          expires_at: new Date(now + 3_600_000),
        })),
      )
    }
  })
  return rows.map((row) => ({ authorization: `Bearer ${row.session.token}`, 'x-elevation-token': row.elevation.token }))
}
