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
    // Attempt 2 fails 20 s before expiry: the 30 s step overshoots and no last chance fits.
    expect(decide(settings, 2, failed('UNAVAILABLE'), { ...expires, expires_at: at(20_000) }, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 2,
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
    expect(decide(settings, 4, failed('UNAVAILABLE'), { expires_at: at(30_000), purpose: 'invitation' }, NOW)).to.deep.equal({
      kind: 'dead_lettered',
      attemptNo: 4,
      reason: 'invitation_expired',
    })
  })
})

describe('a last chance before expiry', () => {
  const settings = { maxAttempts: 5, retrySchedule: SCHEDULE }
  const failed = (failureClass: 'REJECTED' | 'THROTTLED' | 'UNAVAILABLE', retryAfterAt: Date | null = null) =>
    ({ kind: 'failed', failureClass, retryAfterAt, durationMs: 3 }) as const
  // A 600 s challenge issued at NOW; `t` is when the attempt just failed, in ms after NOW.
  const challenge = { expires_at: at(600_000), purpose: 'password_recovery' }
  const decideAt = (t: number, attemptNo: number, outcome: ReturnType<typeof failed>, message = challenge) =>
    decide(settings, attemptNo, outcome, message, at(t))
  const dead = (attemptNo: number, reason: string) => ({ kind: 'dead_lettered', attemptNo, reason })
  const retry = (attemptNo: number, t: number) => ({ kind: 'retry_scheduled', attemptNo, nextAttemptAt: at(t) })

  const cases: [string, () => unknown, unknown][] = [
    [
      'a 3-minute outage: attempt 4 failing at +156 s (next step +756 s) retries at +540 s, a minute before expiry',
      () => decideAt(156_000, 4, failed('UNAVAILABLE')),
      retry(4, 540_000),
    ],
    [
      'a Retry-After past the last-chance moment dead-letters now',
      () => decideAt(400_000, 4, failed('THROTTLED', at(560_000))),
      dead(4, 'challenge_expired'),
    ],
    [
      'a Retry-After before the last-chance moment keeps it',
      () => decideAt(400_000, 4, failed('THROTTLED', at(530_000))),
      retry(4, 540_000),
    ],
    [
      'too little validity left (the moment is under 5 s ahead) dead-letters now',
      () => decideAt(536_000, 4, failed('UNAVAILABLE')),
      dead(4, 'challenge_expired'),
    ],
    ['exactly 5 s ahead is still a last chance', () => decideAt(535_000, 4, failed('UNAVAILABLE')), retry(4, 540_000)],
    [
      'the failed last chance itself dead-letters: its moment is behind the clock',
      () => decideAt(540_300, 4, failed('UNAVAILABLE')),
      dead(4, 'challenge_expired'),
    ],
    [
      'the fifth failure is retries_exhausted, however much validity is left',
      () => decideAt(156_000, 5, failed('UNAVAILABLE')),
      dead(5, 'retries_exhausted'),
    ],
    ['a rejection is still dead-lettered at once', () => decideAt(156_000, 4, failed('REJECTED')), dead(4, 'provider_rejected')],
    ['a step that lands before expiry is kept as scheduled', () => decideAt(156_000, 3, failed('UNAVAILABLE')), retry(3, 276_000)],
    [
      'an invitation gets the same last chance when its schedule overshoots',
      () => decideAt(0, 4, failed('UNAVAILABLE'), { expires_at: at(300_000), purpose: 'invitation' }),
      retry(4, 240_000),
    ],
  ]
  for (const [sentence, run, expected] of cases) it(sentence, () => expect(run()).to.deep.equal(expected))
})
