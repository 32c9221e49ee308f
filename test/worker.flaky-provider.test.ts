import { expect } from 'chai'
import type { DeliveryJob } from '../jobs/delivery-deps.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { DEFAULT_HEALTH_POLICY } from '../src/outbox/provider-health.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { deliverOne } from './support/run-once.ts'
import { scriptedProvider } from './support/scripted-provider.ts'
import { seededRandom } from './support/seeded-random.ts'

/**
 * The breaker (docs/delivery.md "The outage hold and failover") on the worker's own pipeline, time
 * driven by the test's clock: a worker with one send slot takes up to ROUND due jobs a second, each
 * through `runOnce`, and the clock moves a second after each round. A provider that fails a third of
 * its calls is slow, not down; one that fails every call is held, probed, and found back.
 */
describe('a flaky provider is slow, not down: the breaker', () => {
  const f = useOutboxFixture()
  const ROUND = 16
  const policy = { ...DEFAULT_HEALTH_POLICY, random: () => 1 }
  const failure = () => new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable')
  const deps = (provider: ReturnType<typeof scriptedProvider>) => {
    const built = f.harness.deps({ email: provider })
    // A short schedule: the rounds measure the provider's health handling, not the retry schedule.
    return { ...built, settings: { ...built.settings, retrySchedule: [1_000, 1_000, 1_000, 1_000], providerHealth: policy } }
  }
  const logged = (text: string) => f.logs.text().includes(text)
  const providerState = async () =>
    ((await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first())?.state ?? 'up') as string
  const published = async () =>
    Number((await f.db.owner('outbox.security_outbox_messages').where({ state: 'published' }).count({ n: '*' }))[0]!.n)

  /** The jobs due by the test's clock, at most `limit`, handed out by pg-boss as a worker's fetch would. */
  async function dueJobs(limit: number): Promise<DeliveryJob[]> {
    await f.db.owner.raw(
      `UPDATE pgboss.job SET start_after = now() - interval '1 second'
        WHERE name = ? AND state IN ('created', 'retry') AND start_after <= ?`,
      [QUEUES.delivery, f.now],
    )
    return await f.harness.workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: limit })
  }
  /** `rounds` seconds of one send slot: what each round published. */
  async function run(provider: ReturnType<typeof scriptedProvider>, rounds: number, each?: (round: number) => void): Promise<number[]> {
    const perRound: number[] = []
    for (let round = 0; round < rounds; round++) {
      each?.(round)
      const before = await published()
      for (const job of await dueJobs(ROUND)) await deliverOne(deps(provider), job)
      perRound.push((await published()) - before)
      f.now = new Date(f.now.getTime() + 1_000)
    }
    return perRound
  }
  const backlog = async (count: number) => {
    await f.harness.enqueueMany(Array.from({ length: count }, () => uniqueEmail()))
    // The clock starts once the backlog is queued: every job of it is due now.
    f.now = new Date()
  }

  it('keeps a provider that fails a third of its calls at random (seeded) up, delivering about two thirds of the healthy rate', async function () {
    this.timeout(120_000)
    const rounds = 12
    await backlog(2 * ROUND * rounds)
    const healthy = scriptedProvider((call) => ({ providerMessageId: `ok-${call}` }))
    const healthyRate = (await run(healthy, rounds)).reduce((sum, n) => sum + n, 0) / rounds
    expect(healthyRate, 'a healthy provider: every call of the slot delivers').to.equal(ROUND)

    const random = seededRandom(39)
    const flaky = scriptedProvider((call) => (random() < 1 / 3 ? failure() : { providerMessageId: `flaky-${call}` }))
    const perRound = await run(flaky, rounds)
    const flakyRate = perRound.reduce((sum, n) => sum + n, 0) / rounds
    expect(flaky.calls, 'the slot stayed busy: no call held back').to.have.length(ROUND * rounds)
    expect(await providerState(), 'never held').to.equal('up')
    expect(logged('PROVIDER HELD DOWN')).to.equal(false)
    expect(Math.min(...perRound), 'delivery continued every second').to.be.above(0)
    expect(flakyRate / healthyRate, 'about two thirds of the healthy rate').to.be.within(0.58, 0.76)
  })

  it('holds a provider that fails every call once its window fails, probes it one lease at a time, and delivers everything once it is back', async function () {
    this.timeout(180_000)
    await backlog(4 * ROUND)
    let back = false
    const provider = scriptedProvider((call) => (back ? { providerMessageId: `back-${call}` } : failure()))
    await run(provider, 2)
    expect(provider.calls, 'held at the minimum number of calls, all of them failed').to.have.length(DEFAULT_HEALTH_POLICY.minimumCalls)
    expect(await providerState()).to.equal('down')
    expect(logged(`"failures":${DEFAULT_HEALTH_POLICY.minimumCalls}`)).to.equal(true)

    // Held for a minute: the provider is called only by its probes, one at a time, never once per message.
    const callsPerRound: number[] = []
    await run(provider, 60, () => callsPerRound.push(provider.calls.length))
    const probes = provider.calls.length - DEFAULT_HEALTH_POLICY.minimumCalls
    expect(probes, 'probes at a growing interval (5, 10, 20 s, jittered, the held messages spread over 20 s)').to.be.within(1, 6)
    const perRound = callsPerRound.map((calls, round) => (callsPerRound[round + 1] ?? provider.calls.length) - calls)
    expect(Math.max(...perRound), 'one probe at a time').to.equal(1)
    expect(logged('provider probe failed')).to.equal(true)
    expect(await published()).to.equal(0)

    back = true
    const publishedPerRound = await run(provider, 60)
    expect(await providerState(), 'a probe found it back').to.equal('up')
    expect(logged('provider is back')).to.equal(true)
    expect(await published(), 'every code, none lost to the outage').to.equal(4 * ROUND)
    const recovered = publishedPerRound.findIndex((n) => n > 0)
    expect(recovered, 'found back within the longest probe interval and the held messages’ spread').to.be.within(
      0,
      (2 * policy.probeMaxMs) / 1000,
    )
    const done = publishedPerRound.findIndex(
      (_, round) => publishedPerRound.slice(0, round + 1).reduce((sum, n) => sum + n, 0) === 4 * ROUND,
    )
    expect(done - recovered, 'then the held codes go out at the slot’s full rate').to.be.at.most(4 + 1)
  })
})
