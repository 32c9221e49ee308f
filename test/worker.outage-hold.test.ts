import { expect } from 'chai'
import { deliverBatch, deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { claimRequestOf } from '../jobs/delivery-deps.ts'
import { claimMessages } from '../src/outbox/claim.ts'
import { DEFAULT_HEALTH_POLICY } from '../src/outbox/provider-health.ts'
import { recordOutcomesEach } from '../src/outbox/record.ts'
import { runOnce } from '../src/runtime/delivery-pipeline.ts'
import { takeProbeLease } from '../src/outbox/provider-states-sql.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('the outage hold and failover', () => {
  const f = useOutboxFixture()
  const { message, attempts, ciphertexts, deadLetter } = f.rows

  // Jitter at its widest (random = 1): every interval and spread is its full length, so times are exact.
  const policy = { ...DEFAULT_HEALTH_POLICY, random: () => 1 }
  const deps = (...chain: Provider[]) => {
    const built = f.harness.deps({ email: chain })
    return { ...built, settings: { ...built.settings, providerHealth: policy } }
  }
  const down = () => new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable')
  const sent = (id: string) => ({ providerMessageId: id })
  const state = (provider = 'ses') => f.db.owner('outbox.provider_states').where({ provider }).first()
  const seconds = (n: number) => new Date(f.now.getTime() + n * 1000)
  /** Marks SES held down as the fleet would have, its next probe at `nextProbeAt`. */
  const holdSesDown = (nextProbeAt: Date) =>
    f.db.owner('outbox.provider_states').insert({
      provider: 'ses',
      channel: 'email',
      state: 'down',
      failure_streak: 5,
      last_failure_at: f.now,
      down_since: f.now,
      probe_interval_ms: 5_000,
      next_probe_at: nextProbeAt,
      updated_at: f.now,
    })
  const logged = (...parts: string[]) =>
    f.logs
      .text()
      .split('\n')
      .some((line) => parts.every((part) => line.includes(part)))
  const enqueue = async (ttlSeconds = 3_600) => (await f.harness.enqueue(uniqueEmail(), ttlSeconds)).messageId

  it('holds a provider down once at least 90 % of at least 20 calls in its window failed, and holds the next message without spending an attempt', async () => {
    const calls = DEFAULT_HEALTH_POLICY.minimumCalls
    const ids: string[] = []
    for (let i = 0; i <= calls; i++) ids.push(await enqueue())
    const ses = scriptedProvider(down)
    for (let i = 0; i < calls - 1; i++) await deliverOne(deps(ses), await f.harness.nextJob())
    expect(await state(), 'one call short of the minimum: not held, however bad').to.equal(undefined)
    await deliverOne(deps(ses), await f.harness.nextJob())
    expect(await state()).to.include({ state: 'down', failure_streak: calls })
    expect((await state()).next_probe_at.getTime()).to.equal(seconds(5).getTime())
    expect(logged('PROVIDER HELD DOWN', '"provider":"ses"', `"failures":${calls}`)).to.equal(true)

    const held = await f.harness.nextJob()
    expect(held.data.messageId).to.equal(ids[calls])
    await deliverOne(deps(ses), held)
    expect(ses.calls, 'the last message never reached the provider').to.have.length(calls)
    const last = await message(ids[calls]!)
    expect(last).to.include({ state: 'pending', attempt_count: 0 })
    expect(last.available_at.getTime()).to.be.greaterThan(seconds(5).getTime())
    expect(await ciphertexts(ids[calls]!)).to.equal(1)
  })

  it('sends nothing more to a provider once it is held down, even a message routed to it before the hold that was waiting for a send slot', async () => {
    const calls = DEFAULT_HEALTH_POLICY.minimumCalls
    const jobs = []
    for (let i = 0; i < calls + 2; i++) await enqueue()
    for (let i = 0; i < calls + 2; i++) jobs.push(await f.harness.nextJob())
    const ses = scriptedProvider(down)
    const waiting: Provider = {
      ...ses,
      // The send after the minimum returns only once its last failure has held SES down (as a hanging send would).
      dispatch: async (outgoing, signal) => {
        if (ses.calls.length === calls)
          for (let tries = 0; (await state())?.state !== 'down'; tries++) {
            if (tries > 500) throw new Error('SES was never held down')
            await new Promise((resolve) => setTimeout(resolve, 10))
          }
        return await ses.dispatch(outgoing, signal)
      },
    }
    // One send slot: all are claimed and routed to SES at once, then sent one after another.
    await runOnce(deps(waiting), jobs, { concurrency: 1, prefetch: calls + 2 })
    expect(ses.calls, 'the last waited for its slot while SES was being held down').to.have.length(calls + 1)
    const last = jobs[calls + 1]!.data.messageId
    expect(await message(last)).to.include({ state: 'pending', attempt_count: 0 })
  })

  it('sends a few probes under one lease (half-open): of a batch, three messages test the provider and the others wait without spending attempts', async () => {
    await holdSesDown(seconds(-1))
    const ids = [await enqueue(), await enqueue(), await enqueue(), await enqueue(), await enqueue()]
    const ses = scriptedProvider(down)
    const jobs = []
    for (let i = 0; i < ids.length; i++) jobs.push(await f.harness.nextJob())
    await deliverBatch(deps(ses), jobs)

    expect(ses.calls, 'the half-open probes').to.have.length(DEFAULT_HEALTH_POLICY.halfOpenProbes)
    const counts = await Promise.all(ids.map(async (id) => (await message(id)).attempt_count as number))
    expect(counts.sort()).to.deep.equal([0, 0, 1, 1, 1])
    // The probes failed: still down, the next probe twice as far (once for the lease, not once per probe), its lease let go.
    expect(await state()).to.include({ state: 'down', probe_interval_ms: 10_000, probe_until: null })
    expect((await state()).next_probe_at.getTime()).to.equal(seconds(10).getTime())
    expect(logged('provider probe failed')).to.equal(true)
  })

  it('lets only one worker of the fleet take a due probe', async () => {
    await holdSesDown(seconds(-1))
    const until = seconds(30)
    expect(await takeProbeLease(f.harness.worker, 'ses', until, f.now)).to.equal(true)
    expect(await takeProbeLease(f.harness.worker, 'ses', until, f.now)).to.equal(false)
    // A lease whose prober never came back lapses by itself.
    expect(await takeProbeLease(f.harness.worker, 'ses', seconds(60), until)).to.equal(true)
  })

  it('lifts the hold by itself when a probe succeeds, and calls the held messages back at once, soonest expiry first', async () => {
    await holdSesDown(seconds(10))
    const soon = await enqueue(300)
    const later = await enqueue(600)
    const latest = await enqueue(3_600)
    const ses = scriptedProvider((call) => sent(`ses-${call}`))
    await deliverBatch(deps(ses), [await f.harness.nextJob(), await f.harness.nextJob(), await f.harness.nextJob()])
    expect(ses.calls, 'all three held: no probe is due yet').to.have.length(0)
    for (const id of [soon, later, latest]) expect(await message(id)).to.include({ state: 'pending', attempt_count: 0 })

    f.now = seconds(10)
    const probe = await enqueue(900)
    const probeJob = await f.harness.nextDueJob(f)
    expect(probeJob?.data.messageId).to.equal(probe)
    await deliverOne(deps(ses), probeJob!)
    expect(await message(probe)).to.include({ state: 'published', attempt_count: 1 })
    expect(await state()).to.include({ state: 'up', failure_streak: 0, next_probe_at: null })
    expect(logged('provider is back', '"released":3')).to.equal(true)

    // Called back: due now, and handed out soonest expiry first.
    for (const id of [soon, later, latest]) expect((await message(id)).available_at.getTime()).to.equal(f.now.getTime())
    const order: string[] = []
    for (let i = 0; i < 3; i++) {
      const job = await f.harness.nextJob()
      order.push(job.data.messageId)
      await deliverOne(deps(ses), job)
    }
    expect(order).to.deep.equal([soon, later, latest])
    for (const id of [soon, later, latest]) expect(await message(id)).to.include({ state: 'published', attempt_count: 1 })
  })

  it('fails over mid-retry: the attempt after a transient failure on the first provider goes to the second', async () => {
    const id = await enqueue()
    const ses = scriptedProvider(down)
    const smtp = scriptedProvider((call) => sent(`smtp-${call}`), { id: 'smtp', channel: 'email' })
    await deliverOne(deps(ses, smtp), await f.harness.nextJob())
    expect(await ciphertexts(id), 'the secret stays sealed while the message waits').to.equal(1)
    const retry = await f.harness.nextDueJob(f)
    await deliverOne(deps(ses, smtp), retry!)

    expect([ses.calls.length, smtp.calls.length]).to.deep.equal([1, 1])
    expect((await attempts(id)).map((row) => [row.attempt_no, row.provider, row.outcome, row.failure_class])).to.deep.equal([
      [1, 'ses', 'retryable_error', 'UNAVAILABLE'],
      [2, 'smtp', 'published', null],
    ])
    expect(await message(id)).to.include({ state: 'published' })
    expect(await ciphertexts(id), 'deleted at publish').to.equal(0)
  })

  it('never fails a REJECTED answer over: it is the recipient, not the provider', async () => {
    const id = await enqueue()
    const ses = scriptedProvider(() => new DeliveryFailureError('REJECTED', 'MessageRejected'))
    const smtp = scriptedProvider((call) => sent(`smtp-${call}`), { id: 'smtp', channel: 'email' })
    await deliverOne(deps(ses, smtp), await f.harness.nextJob())
    expect(smtp.calls).to.have.length(0)
    expect(await deadLetter(id)).to.include({ reason: 'provider_rejected' })
    expect(await ciphertexts(id), 'deleted at the dead letter').to.equal(0)
    expect(await state(), 'a rejection is an answer: no streak begins').to.equal(undefined)
  })

  it('sends a first attempt straight to the second provider while the first is held down', async () => {
    await holdSesDown(seconds(600))
    const id = await enqueue()
    const ses = scriptedProvider((call) => sent(`ses-${call}`))
    const smtp = scriptedProvider((call) => sent(`smtp-${call}`), { id: 'smtp', channel: 'email' })
    await deliverOne(deps(ses, smtp), await f.harness.nextJob())
    expect([ses.calls.length, smtp.calls.length]).to.deep.equal([0, 1])
    expect((await attempts(id)).map((row) => row.provider)).to.deep.equal(['smtp'])
  })

  it('sends a held message at once when its provider came back between the routing and the record (a probe elsewhere lifted the hold)', async () => {
    await holdSesDown(seconds(60))
    const id = await enqueue()
    const job = await f.harness.nextJob()
    const [claim] = await claimMessages(f.harness.worker, f.harness.workerBoss, [claimRequestOf(job)], f.now)
    expect(claim).to.have.property('kind', 'claimed')
    // Another worker's probe succeeds and its release runs before this deferral exists.
    await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).update({
      state: 'up',
      failure_streak: 0,
      down_since: null,
      probe_interval_ms: null,
      next_probe_at: null,
    })
    const [recorded] = await recordOutcomesEach(
      f.harness.worker,
      f.harness.workerBoss,
      { maxAttempts: 5, retrySchedule: [5_000] },
      [{ messageId: id, lease: claimRequestOf(job).lease, outcome: { kind: 'deferred', until: seconds(40), heldFor: ['ses'] } }],
      f.now,
    )
    expect(recorded).to.deep.equal({ kind: 'deferred', nextAttemptAt: f.now })
    expect((await message(id)).available_at.getTime()).to.equal(f.now.getTime())
  })

  it('lets expiry win: a message held past its expiry is dead-lettered unsent', async () => {
    await holdSesDown(seconds(3_600))
    const id = await enqueue(120)
    const ses = scriptedProvider((call) => sent(`ses-${call}`))
    await deliverOne(deps(ses), await f.harness.nextJob())
    expect(await message(id)).to.include({ state: 'pending', attempt_count: 0 })
    await deliverOne(deps(ses), (await f.harness.nextDueJob(f))!)
    expect(ses.calls).to.have.length(0)
    await f.rows.expectDeadLetteredUnsent(id, 'challenge_expired')
    expect(await deadLetter(id), 'the outage is why').to.include({ last_failure_class: 'UNAVAILABLE' })
  })

  it('loses no code to a 3-minute outage of the only provider: every code arrives within 30 s of recovery, the provider called once per probe', async () => {
    const start = f.now
    const recovery = seconds(180)
    const ids: string[] = []
    for (let i = 0; i < 8; i++) ids.push(await enqueue(600))
    const ses = scriptedProvider(() => (f.now < recovery ? down() : sent('after')))
    const callTimes: Date[] = []
    const recording: Provider = {
      ...ses,
      dispatch: (outgoing, signal) => {
        callTimes.push(f.now)
        return ses.dispatch(outgoing, signal)
      },
    }
    // Codes keep being asked for during the outage.
    const arrivals = [20, 45, 90, 150].map((s) => new Date(start.getTime() + s * 1000))
    for (let job = await f.harness.nextDueJob(f); job; job = await f.harness.nextDueJob(f)) {
      while (arrivals[0] && arrivals[0] <= f.now) {
        arrivals.shift()
        ids.push(await enqueue(600))
      }
      await deliverOne(deps(recording), job)
    }

    for (const id of ids) expect(await message(id), id).to.include({ state: 'published' })
    const published = await f.db.owner('outbox.security_outbox_attempts').whereIn('message_id', ids).where({ outcome: 'published' })
    for (const row of published) expect(row.attempted_at.getTime() - recovery.getTime()).to.be.below(30_000)
    const duringOutage = callTimes.filter((at) => at < recovery)
    // The window's minimum of failed calls (the codes' first attempts and retries) holds it; after that, one
    // probe per interval (5, 10, 20, 20… s: one message at a time here), never one per message.
    expect(duringOutage.length).to.be.at.most(DEFAULT_HEALTH_POLICY.minimumCalls + Math.ceil(180 / 5))
    expect(duringOutage.filter((at) => at.getTime() - start.getTime() > 60_000).length).to.be.at.most(Math.ceil(120 / 20) + 1)
    expect(await f.db.owner('pgboss.job').where({ name: QUEUES.delivery }).whereIn('state', ['created', 'retry'])).to.have.length(0)
  })
})
