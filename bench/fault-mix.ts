import { seededRandom, waitFor } from './measure.ts'
import { spawnProcess, type BenchStack } from './stack.ts'

/**
 * The fault-mix row's retry settings, the same for both drains: a short, flat schedule with room
 * for the few messages that fail many times in a row (0.3¹⁰ of a backlog dead-letters: none at
 * these sizes), so the row measures how the worker handles a flaky provider (issue 39: no hold,
 * no halving of its slots), not how long the default schedule waits (bench/README.md).
 */
const RETRY_SCHEDULE = Array.from({ length: 9 }, () => '50ms').join(',')
const MAX_ATTEMPTS = '10'

type Drain = { seconds: number; calls: number; published: number; deadLettered: number; holds: number; peakRssMb: number }

/**
 * One drain: `count` queued WhatsApp codes through one worker at `concurrency` to the fake
 * Wasender, every call answered after `latencyMs`, a seeded `failShare` of them with a 503 (a
 * provider-side failure: retried, counted by the breaker and the worker's in-flight limit).
 * Drain time: the provider's first call of the backlog → its last message final.
 */
async function drainOnce(
  stack: BenchStack,
  options: { count: number; concurrency: number; latencyMs: number; failShare: number },
): Promise<Drain> {
  const ids = await stack.enqueue(await stack.seedChallenges(options.count))
  await stack.owner.raw('VACUUM ANALYZE outbox.security_outbox_messages, outbox.security_outbox_ciphertexts')
  await stack.owner.raw('ANALYZE pgboss.job')
  const random = seededRandom(39)
  const delayMs = options.latencyMs
  stack.wasender.behave(() => (random() < options.failShare ? { kind: 'status', status: 503, delayMs } : { kind: 'accept', delayMs }))
  const before = stack.wasender.requests.length
  const worker = await spawnProcess(
    'worker',
    // WhatsApp alone: a retry must go back to the failing provider, not out by SMS through a healthy one.
    stack.environment({ WORKER_CONCURRENCY: String(options.concurrency), RETRY_SCHEDULE, MAX_ATTEMPTS, PHONE_CHANNELS: 'whatsapp' }),
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
      300_000,
      `every fault-mix message (${Math.round(options.failShare * 100)} % failing) to be final`,
    )
    peakRssMb = await worker.peakRssMb()
  } finally {
    await worker.stop()
  }
  const calls = stack.wasender.requests.slice(before)
  const firstCallAt = Math.min(...calls.map((call) => call.at))
  const { rows } = await stack.owner.raw(
    `SELECT extract(epoch FROM max(coalesce(published_at, dead_lettered_at))) * 1000 AS last_final_ms,
            count(*) FILTER (WHERE state = 'published') AS published,
            count(*) FILTER (WHERE state = 'dead_lettered') AS dead_lettered
       FROM outbox.security_outbox_messages WHERE id = ANY(?)`,
    [ids],
  )
  return {
    seconds: (Number(rows[0].last_final_ms) - firstCallAt) / 1000,
    calls: calls.length,
    published: Number(rows[0].published),
    deadLettered: Number(rows[0].dead_lettered),
    holds: worker.holds(),
    peakRssMb,
  }
}

/**
 * The "fault-mix drain" row (issue 39 item 3): the same backlog drained through a healthy provider,
 * then through one failing `failShare` of its calls at random (seeded); the ratio of the drain
 * times is the row (target ≤ 1.6: a provider failing 30 % of its calls needs ~1.43 times the calls,
 * so about that much longer if it is neither held nor starved of slots).
 */
export async function faultMixDrain(
  stack: BenchStack,
  options: { count: number; concurrency: number; latencyMs: number; failShare: number },
): Promise<{ healthy: Drain; faulty: Drain; ratio: number }> {
  const healthy = await drainOnce(stack, { ...options, failShare: 0 })
  const faulty = await drainOnce(stack, options)
  return { healthy, faulty, ratio: faulty.seconds / healthy.seconds }
}
