import { randomUUID } from 'node:crypto'
import { fromKnex, PgBoss } from 'pg-boss'
import { Pool } from 'undici'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { createLogger } from '../src/logging/logger.ts'
import { spawnProcess, type BenchProcess, type BenchStack, type PhoneFake } from './stack.ts'

/** The p-th percentile (0–100) of a list, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Runs `task` from `concurrency` loops until `seconds` pass; returns completions per second. */
export async function closedLoop(
  concurrency: number,
  seconds: number,
  task: (n: number, worker: number) => Promise<void>,
): Promise<{ perSecond: number; count: number }> {
  const deadline = performance.now() + seconds * 1000
  const started = performance.now()
  let issued = 0
  let done = 0
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < deadline) {
        await task(issued++, worker)
        done += 1
      }
    }),
  )
  return { perSecond: done / ((performance.now() - started) / 1000), count: done }
}

/** The uncounted start of the raw enqueue ceiling and of the direct recovery row. */
const ENQUEUE_WARMUP_SECONDS = 2

/** Ceiling for enqueue: a knex transaction inserting 3 rows plus `boss.send({ db })`, no HTTP, no crypto. */
export async function rawEnqueue(stack: BenchStack, seconds: number): Promise<number> {
  await stack.owner.raw(
    `CREATE TABLE IF NOT EXISTS public.bench_raw_rows (id uuid PRIMARY KEY, kind text NOT NULL, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
  )
  const queue = 'bench-raw-enqueue'
  if (!(await stack.ownerBoss.getQueue(queue))) await stack.ownerBoss.createQueue(queue)
  const enqueue = async () => {
    await stack.owner.transaction(async (trx) => {
      const id = randomUUID()
      await trx('public.bench_raw_rows').insert({ id, kind: 'challenge', payload: 'x'.repeat(64) })
      await trx('public.bench_raw_rows').insert({ id: randomUUID(), kind: 'message', payload: id })
      await trx('public.bench_raw_rows').insert({ id: randomUUID(), kind: 'ciphertext', payload: 'v1.'.padEnd(120, 'y') })
      await stack.ownerBoss.send(queue, { id }, { db: fromKnex(trx) })
    })
  }
  // Not counted, as every row's warm-up: cold, the first repetition's ceiling read lowest in each of
  // five runs (592–688 tx/s against 721–1 020 later), which flattered that repetition's ratios.
  await closedLoop(16, ENQUEUE_WARMUP_SECONDS, enqueue)
  await stack.settle()
  const { perSecond } = await closedLoop(16, seconds, enqueue)
  return perSecond
}

/**
 * Ceiling for delivery: pg-boss consuming `count` queued jobs with a trivial handler, in this
 * process, at the settings found best on this machine (docs/delivery.md "Delivery settings").
 */
export async function rawConsume(stack: BenchStack, count: number): Promise<number> {
  const queue = `bench-raw-consume-${randomUUID().slice(0, 8)}`
  await stack.ownerBoss.createQueue(queue)
  for (let start = 0; start < count; start += 1000) {
    await stack.ownerBoss.insert(
      queue,
      Array.from({ length: Math.min(1000, count - start) }, (_, i) => ({ data: { n: start + i } })),
    )
  }
  // A new queue name has no statistics yet: without this the planner may scan every job of earlier runs per fetch.
  await stack.owner.raw('ANALYZE pgboss.job')
  const consumer = new PgBoss({
    connectionString: stack.ownerUrl,
    max: 10,
    supervise: false,
    schedule: false,
    migrate: false,
    useListenNotify: true,
  })
  consumer.on('error', () => undefined)
  await consumer.start()
  try {
    let handled = 0
    await consumer.work(
      queue,
      { batchSize: 100, localConcurrency: 2, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true },
      async (jobs) => {
        handled += jobs.length
      },
    )
    await waitFor(async () => handled >= count, 120_000, 'raw consume')
    await waitFor(
      async () =>
        Number((await stack.owner.raw(`SELECT count(*) FROM pgboss.job WHERE name = ? AND state = 'completed'`, [queue])).rows[0].count) >=
        count,
      30_000,
      'raw consume to complete',
    )
  } finally {
    await consumer.stop({ graceful: false })
  }
  const { rows } = await stack.owner.raw(
    `SELECT extract(epoch FROM max(completed_on) - min(started_on)) AS seconds FROM pgboss.job WHERE name = ?`,
    [queue],
  )
  return count / Number(rows[0].seconds)
}

/** The `n`th bench client's own loopback address: 127.0.0.2, .3, … (250 to a /24). */
export const loopbackAddress = (n: number): string => `127.0.${Math.floor(n / 250)}.${2 + (n % 250)}`

/**
 * `count` HTTP clients of one server, each with one connection from its own loopback address
 * (127.0.0.2, .3, …; Linux routes all of 127/8 to this host), as that many distinct clients behind
 * no proxy would be: each has a per-client-limit bucket of its own, instead of every request of the
 * run queueing on one bucket's lock and reading one bucket's ever-growing rows. The address is the
 * client's `localAddress` option: undici's connector overrides a `connect.localAddress` with it
 * (null unless set), so given there it was ignored and every connection came from 127.0.0.1.
 */
export function loopbackClients(url: string, count: number): { pool: (n: number) => Pool; close: () => Promise<void> } {
  const pools = Array.from({ length: count }, (_, i) => new Pool(url, { connections: 1, localAddress: loopbackAddress(i) }))
  return { pool: (n) => pools[n % pools.length]!, close: async () => void (await Promise.all(pools.map((pool) => pool.close()))) }
}

/** POST /password-recoveries for known identifiers through HTTP at `concurrency` connections. */
export async function httpEnqueue(
  stack: BenchStack,
  seconds: number,
  concurrency: number,
): Promise<{ perSecond: number; p50: number; p99: number; non202: number }> {
  // The first 2 s warm a fresh web process up (V8 still compiling its code) and are not counted,
  // as the delivery rows' warm-up; every request, warm-up or counted, is for an address of its own.
  const warmupSeconds = 2
  const identifiers = await stack.seedEmailIdentities(Math.ceil((seconds + warmupSeconds) * 1500))
  await stack.settle()
  const web = await spawnProcess('web', stack.environment({ CLIENT_RATE_LIMIT_PER_MINUTE: '100000' }))
  const clients = loopbackClients(web.url!, concurrency)
  let latencies: number[] = []
  let non202 = 0
  let next = 0
  const recover = async (worker: number) => {
    const started = performance.now()
    const response = await clients.pool(worker).request({
      method: 'POST',
      path: '/password-recoveries',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: identifiers[next++ % identifiers.length] }),
    })
    await response.body.dump()
    latencies.push(performance.now() - started)
    if (response.statusCode !== 202) non202 += 1
  }
  try {
    await closedLoop(concurrency, warmupSeconds, (_n, worker) => recover(worker))
    latencies = []
    const { perSecond } = await closedLoop(concurrency, seconds, (_n, worker) => recover(worker))
    return { perSecond, p50: percentile(latencies, 50), p99: percentile(latencies, 99), non202 }
  } finally {
    await clients.close()
    await web.stop()
  }
}

/** What the recovery route runs (the lookup, then one call that commits), called directly: what the enqueue costs without HTTP and the answer floor. */
export async function directEnqueue(stack: BenchStack, seconds: number): Promise<number> {
  const identifiers = (await stack.seedEmailIdentities(Math.ceil((seconds + ENQUEUE_WARMUP_SECONDS) * 1500))).map((text) =>
    parseIdentifier(text)!,
  )
  const deps = {
    boss: stack.webBoss,
    outboxKey: stack.keys.outboxKey,
    codeHashKey: stack.keys.codeHashKey,
    challengeTtlSeconds: 600,
    clock: () => new Date(),
    logger: createLogger({ level: 'error' }),
    channels: new Set(['email', 'whatsapp'] as const),
  }
  // Every call, warm-up or counted, is for an address of its own.
  let next = 0
  const recover = async () => {
    await requestPasswordRecovery(stack.api, deps, identifiers[next++ % identifiers.length]!)
  }
  await closedLoop(16, ENQUEUE_WARMUP_SECONDS, recover)
  await stack.settle()
  const { perSecond } = await closedLoop(16, seconds, recover)
  return perSecond
}

/**
 * `count` queued WhatsApp codes delivered by `workers` worker processes: published rows per second
 * from the first lease to the last publish, and the workers' peak RSS.
 */
export async function delivery(
  stack: BenchStack,
  options: {
    count: number
    workers: number
    concurrency: number
    providerDelayMs: number
    warmup?: number
    /** The provider and channel the messages go through (default: the fake Wasender on whatsapp). */
    phone?: PhoneFake
    env?: Record<string, string>
  },
) {
  const phone = options.phone ?? { channel: 'whatsapp' as const, label: 'fake Wasender', fake: stack.wasender }
  const provider = phone.fake
  // The warm-up: `warmup` messages queued ahead of the measured ones (pg-boss fetches the oldest
  // first) and delivered by the same workers, not counted, so the rows read workers past V8's
  // start-up (the code interpreted and compiling: ~2.5 times the CPU per message of a warm worker
  // over its first few thousand), as a long-running worker is in production, and a pipeline
  // already running when the measured messages come up.
  const warmup = options.warmup ?? 0
  if (warmup > 0) await stack.enqueue(await stack.seedChallenges(warmup), phone.channel)
  const measured = await stack.seedChallenges(options.count)
  const ids = await stack.enqueue(measured, phone.channel)
  const measuredDestinations = new Set(measured.map((challenge) => challenge.destination))
  // Seeding left dead tuples and fresh rows behind; settle them so every run starts alike.
  await stack.owner.raw('VACUUM ANALYZE outbox.security_outbox_messages, outbox.security_outbox_ciphertexts')
  await stack.owner.raw('ANALYZE pgboss.job')
  provider.behave(() => ({ kind: 'accept', delayMs: options.providerDelayMs }))
  const env = stack.environment({ WORKER_CONCURRENCY: String(options.concurrency), ...options.env })
  const start = provider.requests.length
  const processes: BenchProcess[] = await Promise.all(Array.from({ length: options.workers }, () => spawnProcess('worker', env)))
  // CPU is counted from the last warm-up send on (checked every 5 ms: an array's length, free).
  const warm = async () => {
    const deadline = Date.now() + 300_000
    while (provider.requests.length - start < warmup) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the warm-up')
      await sleep(5)
    }
  }
  const before = start + warmup
  let peakRssMb = 0
  let workerCpu: number
  let postgresCpu: number
  let benchCpu: number
  try {
    await warm()
    const workerCpuAtStart = (await Promise.all(processes.map((worker) => worker.cpuSeconds()))).reduce((sum, value) => sum + value, 0)
    const postgresCpuAtStart = await stack.postgresCpuSeconds()
    // The bench process is the fake provider's host: its CPU is the provider's share of the cores.
    const benchCpuAtStart = process.cpuUsage()
    // Watch the provider's count (free), then confirm in the database once: polling the database
    // every 100 ms would itself take a share of the two cores being measured.
    await waitFor(async () => provider.requests.length - before >= options.count, 300_000, 'the provider to see every message')
    await waitFor(
      async () => {
        const { rows } = await stack.owner.raw(
          `SELECT count(*) FROM outbox.security_outbox_messages WHERE id = ANY(?) AND state = 'published'`,
          [ids],
        )
        return Number(rows[0].count) >= options.count
      },
      60_000,
      'every message to be recorded published',
    )
    postgresCpu = (await stack.postgresCpuSeconds()) - postgresCpuAtStart
    const bench = process.cpuUsage(benchCpuAtStart)
    benchCpu = (bench.user + bench.system) / 1e6
    workerCpu =
      (await Promise.all(processes.map((worker) => worker.cpuSeconds()))).reduce((sum, value) => sum + value, 0) - workerCpuAtStart
    for (const worker of processes) peakRssMb = Math.max(peakRssMb, await worker.peakRssMb())
  } finally {
    await Promise.all(processes.map((worker) => worker.stop()))
  }
  // BENCH_PIPELINE_STATS=1: each worker's own counters (send slots, fetch, claim, commit, event-loop lag).
  if (process.env.BENCH_PIPELINE_STATS === '1') {
    const calls = provider.requests.slice(before).filter((call) => call.finishedAt !== undefined)
    const openMs = calls.reduce((sum, call) => sum + (call.finishedAt! - call.at), 0) / Math.max(1, calls.length)
    // eslint-disable-next-line no-console -- asked for by BENCH_PIPELINE_STATS, for a person at a terminal
    console.log(`    provider: ${calls.length} calls, mean ${openMs.toFixed(1)} ms from arrival to answer`)
    for (const worker of processes)
      // eslint-disable-next-line no-console -- the same
      console.log(`    ${/\{[^\n]*"delivery pipeline stopped"[^\n]*\}/.exec(worker.tail())?.[0] ?? '(no pipeline line)'}`)
  }
  // The window: the provider's first call of a measured message → the last measured message
  // recorded published (the database's clock and the fake's Date.now(): one system clock). Not from
  // the first lease: a claimed message waits ready for a send slot, up to one round of the sends
  // ahead of it (prefetch), so its lease is taken that long before the worker starts sending it:
  // 100 ms at the 100 ms provider, a fixed ~2.5 % of that row's 4 s that a perfect worker loses too.
  let firstCallAt = Infinity
  for (const call of provider.requests.slice(start)) if (measuredDestinations.has(call.to)) firstCallAt = Math.min(firstCallAt, call.at)
  const { rows } = await stack.owner.raw(
    `SELECT extract(epoch FROM max(published_at)) * 1000 AS last_published_ms FROM outbox.security_outbox_messages WHERE id = ANY(?)`,
    [ids],
  )
  // CPU per message from the provider's last warm-up call to the last publish confirmed.
  return {
    perSecond: (1000 * options.count) / (Number(rows[0].last_published_ms) - firstCallAt),
    peakRssMb,
    workerCpuUs: (1e6 * workerCpu) / options.count,
    postgresCpuUs: (1e6 * postgresCpu) / options.count,
    benchCpuUs: (1e6 * benchCpu) / options.count,
    /** The texts the provider received for the measured messages. */
    texts: provider.requests.slice(start).flatMap((call) => (measuredDestinations.has(call.to) ? [call.text] : [])),
  }
}

/** A seeded PRNG (mulberry32), so every run draws the same provider behaviour. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** The realistic provider: latency log-normal with this median and 99th percentile; `hangShare` of calls never answer. */
export function realisticProvider(options: { p50Ms: number; p99Ms: number; hangShare: number; seed?: number }) {
  const random = seededRandom(options.seed ?? 16)
  const mu = Math.log(options.p50Ms)
  const sigma = Math.log(options.p99Ms / options.p50Ms) / 2.326_348
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
  return () =>
    random() < options.hangShare ? ({ kind: 'hang' } as const) : ({ kind: 'accept', delayMs: Math.exp(mu + sigma * normal()) } as const)
}

/**
 * The realistic provider row: `count` queued codes, one worker at `concurrency`, every call drawn
 * from `realisticProvider` (a hang lasts until the worker gives up at SEND_TIMEOUT_MS, then the
 * message is retried). Measured while fresh messages were still waiting (from the first call to
 * the first call of the last fresh message), from the provider's side: calls finished per second,
 * and the ideal for that window, concurrency ÷ the mean duration of those calls (a hang counts
 * as the time until the worker hung up).
 */
export async function realisticDelivery(stack: BenchStack, options: { count: number; concurrency: number; sendTimeoutMs: number }) {
  const ids = await stack.enqueue(await stack.seedChallenges(options.count))
  await stack.owner.raw('VACUUM ANALYZE outbox.security_outbox_messages, outbox.security_outbox_ciphertexts')
  await stack.owner.raw('ANALYZE pgboss.job')
  const draw = realisticProvider({ p50Ms: 80, p99Ms: 800, hangShare: 0.03 })
  // Every other hang is one where the provider did send (the ambiguous case): a retry of that
  // message may reach the person twice, and the spot-check allows exactly those duplicates.
  let hangs = 0
  stack.wasender.behave((_call, request) => {
    const behaviour = draw()
    if (behaviour.kind !== 'hang' || hangs++ % 2 === 0) return behaviour
    stack.ambiguous.add(request.to)
    return { kind: 'accept-then-hang' }
  })
  const before = stack.wasender.requests.length
  const worker = await spawnProcess(
    'worker',
    stack.environment({
      WORKER_CONCURRENCY: String(options.concurrency),
      SEND_TIMEOUT_MS: String(options.sendTimeoutMs),
      RETRY_SCHEDULE: '100ms,200ms,400ms,800ms',
    }),
  )
  let peakRssMb: number
  try {
    await waitFor(
      async () => {
        const { rows } = await stack.owner.raw(
          `SELECT count(*) FROM outbox.security_outbox_messages WHERE id = ANY(?) AND state IN ('pending', 'leased')`,
          [ids],
        )
        return Number(rows[0].count) === 0
      },
      600_000,
      'every realistic-provider message to be final',
    )
    peakRssMb = await worker.peakRssMb()
  } finally {
    await worker.stop()
  }
  const calls = stack.wasender.requests.slice(before)
  const seen = new Set<string>()
  let lastFresh = 0
  for (const call of calls) {
    if (!seen.has(call.to)) lastFresh = Math.max(lastFresh, call.at)
    seen.add(call.to)
  }
  const start = Math.min(...calls.map((call) => call.at))
  const finished = calls.filter((call) => call.finishedAt !== undefined && call.finishedAt <= lastFresh)
  const seconds = (lastFresh - start) / 1000
  const perSecond = finished.length / seconds
  const meanServiceMs = finished.reduce((sum, call) => sum + (call.finishedAt! - call.at), 0) / finished.length
  const ideal = options.concurrency / (meanServiceMs / 1000)
  const { rows } = await stack.owner.raw(
    `SELECT count(*) FILTER (WHERE state = 'published') AS published, count(*) AS total FROM outbox.security_outbox_messages WHERE id = ANY(?)`,
    [ids],
  )
  return { perSecond, ideal, meanServiceMs, published: Number(rows[0].published), total: Number(rows[0].total), peakRssMb }
}

/**
 * Commit-to-provider latency: one worker running, messages committed one per transaction at a
 * steady `rate` per second; latency = arrival at the fake provider − commit. The first
 * `warmupSeconds` of the stream are a fresh worker's start (V8 still compiling its code, the
 * first connections opening): reported apart as `cold` (its first 50 messages), then `seconds`
 * of the same stream are the steady state the target is about.
 */
export async function commitToProvider(
  stack: BenchStack,
  options: { rate: number; seconds: number; warmupSeconds: number; concurrency: number },
) {
  const warmup = await stack.seedChallenges(options.rate * options.warmupSeconds)
  const measured = await stack.seedChallenges(options.rate * options.seconds)
  const committedAt = new Map<string, number>()
  const arrivedAt = new Map<string, number>()
  stack.wasender.behave((_call, request) => {
    arrivedAt.set(request.to, performance.now())
    return { kind: 'accept' }
  })
  const worker = await spawnProcess('worker', stack.environment({ WORKER_CONCURRENCY: String(options.concurrency) }))
  let peakRssMb: number
  try {
    await sleep(500)
    const stream = [...warmup, ...measured]
    const started = performance.now()
    const pending: Promise<void>[] = []
    for (let i = 0; i < stream.length; i++) {
      const due = started + (i * 1000) / options.rate
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      const challenge = stream[i]!
      pending.push(
        stack.api
          .transaction((trx) => stack.enqueueOne(trx, challenge))
          .then(() => void committedAt.set(challenge.destination, performance.now())),
      )
    }
    await Promise.all(pending)
    await waitFor(
      async () => stream.every((challenge) => arrivedAt.has(challenge.destination)),
      60_000,
      'every steady-rate message to arrive',
    )
    peakRssMb = await worker.peakRssMb()
  } finally {
    await worker.stop()
  }
  // A commit acknowledged after the provider already saw the message counts as 0 ms.
  const latencies = (challenges: typeof measured) =>
    challenges.map((challenge) => Math.max(0, arrivedAt.get(challenge.destination)! - committedAt.get(challenge.destination)!))
  const steady = latencies(measured)
  const cold = latencies(warmup.slice(0, 50))
  return {
    p50: percentile(steady, 50),
    p95: percentile(steady, 95),
    p99: percentile(steady, 99),
    coldP50: percentile(cold, 50),
    coldMax: Math.max(...cold),
    peakRssMb,
  }
}

export async function waitFor(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}
