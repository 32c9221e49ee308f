import { createHash, randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { closedLoop, loopbackClients, percentile } from './measure.ts'
import { spawnProcess, type BenchStack } from './stack.ts'

/**
 * `POST /v1/messages` with one API key (limits far above the load) for distinct addresses, from
 * `concurrency` loopback clients, counted after 2 s of warm-up of a fresh web process: the courier
 * API's enqueue (key check, rate limit, idempotency key, destination budget, sealed message) per second.
 */
export async function courierEnqueue(
  stack: BenchStack,
  seconds: number,
  concurrency: number,
): Promise<{ perSecond: number; p50: number; p99: number; non202: number }> {
  const id = uuidv7()
  const secret = randomBytes(32).toString('base64url')
  await stack.owner('platform.api_keys').insert({
    id,
    name: 'bench',
    secret_hash: createHash('sha256').update(secret).digest(),
    purposes: ['verification_code'],
    channels: ['email'],
    requests_per_minute: 100_000,
    per_destination_per_hour: 1_000,
    per_destination_per_day: 10_000,
    // The key's hourly budgets (20261206004100) far above the load too: their defaults (1 000 sends,
    // 100 new addresses an hour) would refuse most of the row's requests 429 api_key_budget_exhausted.
    sends_per_hour: 6_000_000,
    destinations_per_hour: 6_000_000,
    created_by: uuidv7(),
    created_at: new Date(),
  })
  const authorization = `Bearer sp_live_${id.replaceAll('-', '')}_${secret}`
  await stack.settle()
  const web = await spawnProcess('web', stack.environment({ CLIENT_RATE_LIMIT_PER_MINUTE: '100000' }))
  const clients = loopbackClients(web.url!, concurrency)
  const run = randomBytes(4).toString('hex')
  let latencies: number[] = []
  let non202 = 0
  let next = 0
  const send = async (worker: number) => {
    const n = next++
    const started = performance.now()
    const response = await clients.pool(worker).request({
      method: 'POST',
      path: '/v1/messages',
      headers: { 'content-type': 'application/json', authorization, 'idempotency-key': `${run}-${n}` },
      body: JSON.stringify({
        purpose: 'verification_code',
        channel: 'email',
        destination: `courier-${run}-${n}@bench.sealpost.test`,
        secret: { code: String(100_000 + (n % 900_000)) },
        expiresAt: new Date(Date.now() + 600_000).toISOString(),
      }),
    })
    await response.body.dump()
    latencies.push(performance.now() - started)
    if (response.statusCode !== 202) non202 += 1
  }
  try {
    await closedLoop(concurrency, 2, (_n, worker) => send(worker))
    latencies = []
    const { perSecond } = await closedLoop(concurrency, seconds, (_n, worker) => send(worker))
    return { perSecond, p50: percentile(latencies, 50), p99: percentile(latencies, 99), non202 }
  } finally {
    await clients.close()
    await web.stop()
  }
}
