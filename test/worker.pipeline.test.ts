import { expect } from 'chai'
import { DeliveryFailureError, type OutgoingMessage, type Provider } from '../src/providers/provider.ts'
import { sendWindow } from '../src/outbox/send-caps.ts'
import { startDeliveryPipeline, type DeliveryPipeline } from '../src/runtime/delivery-pipeline.ts'
import { groupCommit } from '../src/runtime/group-commit.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { SCHEDULE, useOutboxFixture } from './support/outbox-harness.ts'

/** A provider that answers at once, except for the messages the test holds until it lets them go. */
function gatedProvider() {
  const calls: OutgoingMessage[] = []
  const held = new Map<string, () => void>()
  const holding = new Set<string>()
  const provider: Provider = {
    id: 'ses',
    channel: 'email',
    async dispatch(message) {
      calls.push(message)
      if (holding.has(message.destination)) await new Promise<void>((resolve) => held.set(message.destination, resolve))
      return { providerMessageId: `p-${calls.length}` }
    },
  }
  return {
    provider,
    calls,
    hold: (destination: string) => holding.add(destination),
    release: (destination: string) => held.get(destination)?.(),
    isHeld: (destination: string) => held.has(destination),
  }
}

describe('delivery pipeline', () => {
  const f = useOutboxFixture()
  const { message, attempts } = f.rows
  let pipeline: DeliveryPipeline | undefined
  afterEach(async () => {
    await pipeline?.stop()
    pipeline = undefined
  })

  const idOf = async (email: string): Promise<string> =>
    (await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first()).id

  it('records every other message of a fetch while one send of it still hangs (no head-of-line blocking)', async () => {
    const emails = Array.from({ length: 8 }, () => uniqueEmail())
    await f.harness.enqueueMany(emails)
    const gate = gatedProvider()
    gate.hold(emails[3]!)
    pipeline = startDeliveryPipeline(f.harness.deps({ email: gate.provider }), { concurrency: 16, pollMs: 60_000 })

    // All eight are fetched and claimed together; seven are published while the eighth is out.
    await eventually(async () => {
      const states = await Promise.all(emails.map(async (email) => (await message(await idOf(email))).state))
      return states.filter((state) => state === 'published').length === 7 ? true : undefined
    }, 'the seven others to be published')
    expect(gate.isHeld(emails[3]!)).to.equal(true)
    const stuck = await idOf(emails[3]!)
    expect(await message(stuck)).to.include({ state: 'leased', attempt_count: 0 })

    gate.release(emails[3]!)
    await eventually(async () => ((await message(stuck)).state === 'published' ? true : undefined), 'the held one to be published')
    expect(gate.calls).to.have.length(8)
  })

  it('records outcomes that arrive together in shared transactions, not one per message', async () => {
    const emails = Array.from({ length: 32 }, () => uniqueEmail())
    await f.harness.enqueueMany(emails)
    let begins = 0
    const count = (query: { sql: string }) => {
      if (/^begin/i.test(query.sql)) begins += 1
    }
    f.harness.worker.on('query', count)
    const gate = gatedProvider()
    try {
      pipeline = startDeliveryPipeline(f.harness.deps({ email: gate.provider }), { concurrency: 32, pollMs: 60_000 })
      await eventually(async () => {
        const [row] = await f.db.owner('outbox.security_outbox_messages').where({ state: 'published' }).count({ n: '*' })
        return Number(row?.n) === 32 ? true : undefined
      }, 'all 32 to be published')
    } finally {
      f.harness.worker.off('query', count)
    }
    // One claim statement needs no transaction; the records of 32 instant sends land in a few group commits.
    expect(begins).to.be.at.least(1).and.at.most(8)
  })

  it('asks a fetch for about what the queue holds: twice the last find (8 at least), doubling after each full fetch', async () => {
    const deps = f.harness.deps({ email: gatedProvider().provider })
    const { boss } = deps
    const fetch = boss.fetch.bind(boss)
    const fetches: { asked: number; found: number }[] = []
    boss.fetch = (async (name: string, options: { batchSize: number }) => {
      const jobs = await fetch(name, options)
      fetches.push({ asked: options.batchSize, found: jobs.length })
      return jobs
    }) as typeof boss.fetch
    try {
      // 64 slots: room for 128 fetched jobs, a fetch at 8 free (64 ÷ 8).
      pipeline = startDeliveryPipeline(deps, { concurrency: 64, pollMs: 60_000 })
      await eventually(async () => (fetches.length > 0 ? true : undefined), 'the first fetch')
      const emails = Array.from({ length: 40 }, () => uniqueEmail())
      await f.harness.enqueueMany(emails)
      // What the worker's NOTIFY listener does when the enqueue commits.
      pipeline.wake()
      await eventually(async () => {
        const [row] = await f.db.owner('outbox.security_outbox_messages').where({ state: 'published' }).count({ n: '*' })
        return Number(row?.n) === 40 ? true : undefined
      }, 'all 40 to be published')
    } finally {
      boss.fetch = fetch
    }
    expect(fetches[0], 'an idle worker asks for the floor, not its 128 of room').to.deep.equal({ asked: 8, found: 0 })
    for (let i = 1; i < fetches.length; i++) {
      const { asked, found } = fetches[i - 1]!
      expect(fetches[i]!.asked, `fetch ${i}`).to.be.at.most(found >= asked ? 2 * asked : Math.max(8, 2 * found))
    }
    expect(
      fetches.some(({ asked }) => asked >= 16),
      'a full fetch doubles the next',
    ).to.equal(true)
  })

  it('wakes for a retry it scheduled when it falls due, without waiting for a poll', async () => {
    const email = uniqueEmail()
    await f.harness.enqueue(email)
    const id = await idOf(email)
    // The worker's clock runs 4.7 s behind the database's: the first retry (SCHEDULE[0] = 5 s after
    // the failure by the worker's clock) is due 0.3 s after the failure in real time.
    f.now = new Date(Date.now() - SCHEDULE[0]! + 300)
    let calls = 0
    const provider: Provider = {
      id: 'ses',
      channel: 'email',
      async dispatch() {
        calls += 1
        if (calls === 1) throw new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable')
        return { providerMessageId: 'second' }
      },
    }
    const started = Date.now()
    // A one-minute poll: only the local due timer can bring the retry back within the wait below.
    pipeline = startDeliveryPipeline(f.harness.deps({ email: provider }), { concurrency: 4, pollMs: 60_000 })
    await eventually(async () => ((await message(id)).state === 'published' ? true : undefined), 'the retry to be published', 20_000)
    expect(Date.now() - started).to.be.below(20_000)
    expect((await attempts(id)).map((row) => row.outcome)).to.deep.equal(['retryable_error', 'published'])
  })

  it('sends nothing more to a provider once a send comes back THROTTLED with Retry-After: the claimed rest wait for the pause, no attempt spent', async () => {
    const emails = Array.from({ length: 8 }, () => uniqueEmail())
    await f.harness.enqueueMany(emails)
    const retryAfter = new Date(Date.now() + 30_000)
    let calls = 0
    const provider: Provider = {
      id: 'ses',
      channel: 'email',
      async dispatch() {
        calls += 1
        if (calls === 1) throw new DeliveryFailureError('THROTTLED', 'TooManyRequests', retryAfter)
        return { providerMessageId: `p-${calls}` }
      },
    }
    // Two send slots and up to two more claimed and ready: all eight fetched before the 429 is known.
    pipeline = startDeliveryPipeline(f.harness.deps({ email: provider }), { concurrency: 2, prefetch: 2, pollMs: 60_000 })
    // Under load the 429 can come back before the last fetch: wait until every message has been
    // through a claim (none leased, none still due before the pause), not merely until the pause exists.
    await eventually(async () => {
      const pause = await f.db.owner('outbox.paused_providers').where({ provider: 'ses' }).first()
      if (!pause) return undefined
      const open = await f.db
        .owner('outbox.security_outbox_messages')
        .where({ state: 'leased' })
        .orWhere((q) => {
          void q.where({ state: 'pending' }).where('available_at', '<', new Date(pause.paused_until.getTime() - 1_000))
        })
      return open.length === 0 ? true : undefined
    }, 'every message published or put back to the pause')
    await pipeline.stop()
    pipeline = undefined

    // The 429 and the one send already in flight beside it; nothing after.
    expect(calls).to.be.at.most(2)
    const rows = await f.db.owner('outbox.security_outbox_messages').select('state', 'attempt_count', 'available_at')
    const waiting = rows.filter((row) => row.state === 'pending')
    expect(waiting.length).to.be.at.least(6)
    expect(
      waiting.filter((row) => row.attempt_count === 1),
      'only the throttled one spent an attempt',
    ).to.have.length(1)
    const pause = await f.db.owner('outbox.paused_providers').where({ provider: 'ses' }).first()
    for (const row of waiting) expect(row.available_at.getTime()).to.be.closeTo(pause.paused_until.getTime(), 1_000)
  })

  it('lets a distributed pump past a channel cap of N per hour send N, the rest held for the next hour with no attempt spent', async () => {
    // The pump's codes are strangers' (owners' are never held: docs/security.md "Caps from the owner's side").
    for (let i = 0; i < 6; i++) await f.harness.enqueueStrangers(uniqueEmail())
    const gate = gatedProvider()
    pipeline = startDeliveryPipeline(
      { ...f.harness.deps({ email: gate.provider }), sendCaps: { perChannel: { email: 4 }, perCountry: {} } },
      { concurrency: 4, pollMs: 60_000 },
    )
    const hourEnd = sendWindow(f.now).end
    await eventually(async () => {
      const rows = await f.db.owner('outbox.security_outbox_messages').select('state', 'available_at')
      const settled = rows.filter((row) => row.state === 'published' || (row.state === 'pending' && row.available_at >= hourEnd))
      return settled.length === 6 ? true : undefined
    }, 'four published and two put back to the next hour')
    await pipeline.stop()
    pipeline = undefined

    expect(gate.calls).to.have.length(4)
    const waiting = await f.db.owner('outbox.security_outbox_messages').where({ state: 'pending' })
    expect(waiting).to.have.length(2)
    for (const row of waiting) expect(row).to.include({ attempt_count: 0 })
  })

  it('drains on stop: a send in flight finishes and is recorded before stop resolves, and nothing new is fetched', async () => {
    const [first, second] = [uniqueEmail(), uniqueEmail()]
    await f.harness.enqueue(first)
    const gate = gatedProvider()
    gate.hold(first)
    pipeline = startDeliveryPipeline(f.harness.deps({ email: gate.provider }), { concurrency: 4, pollMs: 60_000 })
    await eventually(async () => (gate.isHeld(first) ? true : undefined), 'the send to start')
    const stopping = pipeline.stop()
    await f.harness.enqueue(second)
    pipeline.wake()
    setTimeout(() => gate.release(first), 50)
    await stopping
    pipeline = undefined
    expect(await message(await idOf(first))).to.include({ state: 'published', attempt_count: 1 })
    expect(await message(await idOf(second))).to.include({ state: 'pending' })
    expect(gate.calls).to.have.length(1)
  })
})

describe('group commit', () => {
  it('commits what arrives within the window together, never waits for items added later, and fails items alone', async () => {
    const groups: number[][] = []
    let releaseFirst: () => void = () => {}
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve))
    const committer = groupCommit<number, string>(
      async (items) => {
        groups.push(items)
        if (groups.length === 1) await firstHeld
        return items.map((item) => (item === 13 ? { kind: 'failed' as const, error: new Error('thirteen') } : `ok-${item}`))
      },
      { windowMs: 5, maxGroup: 3, maxCommits: 1 },
    )

    const first = [1, 2].map((item) => committer.add(item))
    await new Promise((resolve) => setTimeout(resolve, 20))
    // The first group is in its commit; these wait for the next one, filling it to maxGroup.
    const later = [11, 12, 13, 14].map((item) => committer.add(item))
    const thirteen = later[2]!.catch((error: Error) => error.message)
    releaseFirst()
    expect(await Promise.all(first)).to.deep.equal(['ok-1', 'ok-2'])
    expect(await Promise.all([later[0], later[1], thirteen, later[3]])).to.deep.equal(['ok-11', 'ok-12', 'thirteen', 'ok-14'])
    await committer.drain()
    expect(groups).to.deep.equal([[1, 2], [11, 12, 13], [14]])
  })
})
