import { expect } from 'chai'
import { DEFAULT_LIMIT_POLICY, providerLimits, type Verdict } from '../src/runtime/provider-limits.ts'
import { seededRandom } from './support/seeded-random.ts'

describe("a worker's in-flight limit per provider (back off by concurrency, not by stopping)", () => {
  const policy = { ...DEFAULT_LIMIT_POLICY, random: () => 1 }
  /** `calls` calls of `provider`, `concurrency` at a time: each round fills the limit, then every call ends as `verdict` says. */
  const rounds = (limits: ReturnType<typeof providerLimits>, calls: number, verdict: () => Verdict) => {
    const inFlight: number[] = []
    for (let made = 0; made < calls;) {
      let round = 0
      while (made < calls && limits.tryAcquire('ses')) {
        round += 1
        made += 1
      }
      inFlight.push(round)
      for (let i = 0; i < round; i++) limits.release('ses', verdict())
    }
    return inFlight
  }

  it('keeps a provider failing a third of its calls at random at nine tenths of its slots or more', () => {
    const limits = providerLimits(64, policy)
    const random = seededRandom(39)
    const inFlight = rounds(limits, 6_400, () => (random() < 1 / 3 ? 'failure' : 'success'))
    const mean = inFlight.reduce((sum, n) => sum + n, 0) / inFlight.length
    expect(mean, 'calls in flight per round').to.be.at.least(0.9 * 64)
  })

  it('holds a provider that fails every call to a few slots within a round of failures, so it cannot take every send slot', () => {
    const limits = providerLimits(64, policy)
    const inFlight = rounds(limits, 64 + 16, () => 'failure')
    expect(inFlight[0], 'the first round: every slot').to.equal(64)
    expect(limits.limitOf('ses')).to.be.at.most(8)
    expect(limits.tryAcquire('smtp'), "another provider's limit is its own").to.equal(true)
  })

  it('never shrinks on answers that say nothing of the provider (REJECTED, one recipient, a worker error)', () => {
    const limits = providerLimits(16, policy)
    rounds(limits, 160, () => 'neutral')
    expect(limits.limitOf('ses')).to.equal(16)
  })

  it('refuses a call past the limit without waiting, and backs the turned-away message off longer the lower the limit', () => {
    const limits = providerLimits(4, policy)
    for (let i = 0; i < 4; i++) expect(limits.tryAcquire('ses')).to.equal(true)
    expect(limits.tryAcquire('ses')).to.equal(false)
    expect(limits.backoffMs('ses')).to.equal(1_000)
    for (let i = 0; i < 4; i++) limits.release('ses', 'failure')
    expect(limits.limitOf('ses')).to.be.below(4)
    expect(limits.backoffMs('ses')).to.be.above(1_000)
    expect(providerLimits(64, { ...policy, random: () => 0 }).backoffMs('ses'), 'jittered: half at least').to.equal(500)
  })

  it('ramps a provider whose hold lifted back up from an eighth of the slots, one more per success', () => {
    const limits = providerLimits(64, policy)
    limits.ramp('ses')
    expect(limits.limitOf('ses')).to.equal(8)
    const inFlight = rounds(limits, 8 + 16 + 32, () => 'success')
    expect(inFlight.slice(0, 3)).to.deep.equal([8, 16, 32])
    expect(limits.limitOf('ses')).to.equal(64)
  })
})
