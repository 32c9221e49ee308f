import { expect } from 'chai'
import { decide, nextRetryAt } from '../src/outbox/retry-policy.ts'

const SCHEDULE = [5_000, 30_000, 120_000, 600_000, 1_800_000]
const NOW = new Date('2026-11-30T12:00:00.000Z')
const at = (ms: number) => new Date(NOW.getTime() + ms)

describe('retry policy', () => {
  it('follows 5 s, 30 s, 2 min, 10 min after attempts 1 to 4', () => {
    expect([1, 2, 3, 4].map((n) => nextRetryAt(NOW, n, null, SCHEDULE).getTime() - NOW.getTime())).to.deep.equal([
      5_000, 30_000, 120_000, 600_000,
    ])
  })

  it('honours a later Retry-After and ignores an earlier or invalid one', () => {
    expect(nextRetryAt(NOW, 1, at(90_000), SCHEDULE)).to.deep.equal(at(90_000))
    expect(nextRetryAt(NOW, 2, at(1_000), SCHEDULE)).to.deep.equal(at(30_000))
    expect(nextRetryAt(NOW, 1, new Date(Number.NaN), SCHEDULE)).to.deep.equal(at(5_000))
  })
})

describe('the decision after an attempt', () => {
  const settings = { maxAttempts: 5, retrySchedule: SCHEDULE }
  const expires = { expires_at: at(600_000), purpose: 'password_recovery' }
  const failed = (failureClass: 'REJECTED' | 'THROTTLED' | 'UNAVAILABLE' | 'INDETERMINATE', retryAfterAt: Date | null = null) =>
    ({ kind: 'failed', failureClass, retryAfterAt, durationMs: 3 }) as const

  it('publishes an accepted send', () => {
    expect(decide(settings, 1, { kind: 'published' }, expires, NOW)).to.deep.equal({
      kind: 'published',
      attemptNo: 1,
    })
  })

  it('dead-letters a rejection at once', () => {
    expect(decide(settings, 1, failed('REJECTED'), expires, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 1,
      reason: 'provider_rejected',
    })
  })

  it('retries transport faults on the schedule', () => {
    for (const failureClass of ['THROTTLED', 'UNAVAILABLE', 'INDETERMINATE'] as const) {
      expect(decide(settings, 2, failed(failureClass), expires, NOW)).to.deep.equal({
        kind: 'retry_scheduled',
        attemptNo: 2,
        nextAttemptAt: at(30_000),
      })
    }
  })

  it('dead-letters the fifth failure as retries_exhausted', () => {
    expect(decide(settings, 5, failed('UNAVAILABLE'), { ...expires, expires_at: at(3_600_000) }, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 5,
      reason: 'retries_exhausted',
    })
  })

  it('never schedules a retry after the challenge expires', () => {
    expect(decide(settings, 4, failed('UNAVAILABLE'), expires, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 4,
      reason: 'challenge_expired',
    })
    const longPauses = { ...settings, providerPause: { maxPauseSeconds: 3_600, random: () => 1 } }
    expect(decide(longPauses, 1, failed('THROTTLED', at(700_000)), expires, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 1,
      reason: 'challenge_expired',
    })
  })

  it('waits for a Retry-After only up to MAX_PROVIDER_PAUSE_SECONDS (300 s by default), so a year-long one costs no code', () => {
    expect(decide(settings, 1, failed('THROTTLED', at(31_536_000_000)), expires, NOW)).to.deep.equal({
      kind: 'retry_scheduled',
      attemptNo: 1,
      nextAttemptAt: at(300_000),
    })
    expect(
      decide({ ...settings, providerPause: { maxPauseSeconds: 60, random: () => 1 } }, 1, failed('THROTTLED', at(700_000)), expires, NOW),
    ).to.deep.equal({ kind: 'retry_scheduled', attemptNo: 1, nextAttemptAt: at(60_000) })
  })

  it('calls an invitation that would retry past its expiry invitation_expired', () => {
    expect(decide(settings, 4, failed('UNAVAILABLE'), { ...expires, purpose: 'invitation' }, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 4,
      reason: 'invitation_expired',
    })
  })
})
