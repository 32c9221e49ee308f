import { expect } from 'chai'
import { eventually, uniquePhone } from './support/helpers.ts'
import { useProcessFixture } from './support/process-fixture.ts'

const BACKLOG = 2_000

describe('two worker processes on one backlog', () => {
  const f = useProcessFixture({ harness: true })

  it(`ends all ${BACKLOG} messages terminal under 20% THROTTLED answers, each attempt recorded once and no send under another's lease`, async function () {
    this.timeout(180_000)
    // Every fifth provider call is throttled (no Retry-After, so no fleet pause): retries follow a
    // millisecond schedule, configured, not slept through.
    f.wasender.behave((call) => (call % 5 === 0 ? { kind: 'status', status: 429 } : { kind: 'accept' }))
    await f.harness.enqueueMany(Array.from({ length: BACKLOG }, () => uniquePhone()))
    const settings = { RETRY_SCHEDULE: '20ms,40ms,80ms,160ms,320ms', LOG_LEVEL: 'warn' }
    f.worker(settings)
    f.worker(settings)

    await eventually(
      async () => {
        const [open] = await f.db.owner('outbox.security_outbox_messages').whereIn('state', ['pending', 'leased']).count({ n: '*' })
        return Number(open?.n) === 0 ? true : undefined
      },
      'every message to become terminal',
      150_000,
    )

    const states = await f.db.owner('outbox.security_outbox_messages').select('state').count({ n: '*' }).groupBy('state')
    const total = states.reduce((sum, row) => sum + Number(row.n), 0)
    expect(total).to.equal(BACKLOG)

    const [attemptCounts] = await f.db.owner
      .raw(
        `SELECT count(*)::int AS rows, count(DISTINCT (message_id, attempt_no))::int AS distinct_rows FROM outbox.security_outbox_attempts`,
      )
      .then((result) => result.rows)
    expect(attemptCounts.rows).to.equal(attemptCounts.distinct_rows)

    // Each provider call must be one recorded attempt of the message it was for: a send made while
    // another worker held the lease would be a call with no attempt of its own (or a second accept).
    const attemptsByDestination = new Map<string, { attempts: number; state: string }>()
    const recorded = await f.db.owner('outbox.security_outbox_messages as m').select('m.destination', 'm.state', 'm.attempt_count')
    for (const row of recorded) attemptsByDestination.set(row.destination, { attempts: row.attempt_count, state: row.state })
    const callsByDestination = new Map<string, { calls: number; accepted: number }>()
    for (const request of f.wasender.requests) {
      const entry = callsByDestination.get(request.to) ?? { calls: 0, accepted: 0 }
      entry.calls += 1
      if (request.accepted) entry.accepted += 1
      callsByDestination.set(request.to, entry)
    }
    const mismatches = [...attemptsByDestination].filter(
      ([destination, { attempts }]) => (callsByDestination.get(destination)?.calls ?? 0) !== attempts,
    )
    expect(mismatches, 'destinations whose provider calls differ from their recorded attempts').to.deep.equal([])
    expect(
      [...callsByDestination.values()].filter((entry) => entry.accepted > 1),
      'messages sent twice',
    ).to.deep.equal([])
    const published = [...attemptsByDestination.values()].filter((entry) => entry.state === 'published').length
    expect(published).to.equal(f.wasender.accepted().length)
    expect(published).to.be.greaterThan(BACKLOG * 0.95)
  })
})
