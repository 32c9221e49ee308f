import { expect } from 'chai'
import {
  afterAnswer,
  afterTransientFailures,
  DEFAULT_HEALTH_POLICY,
  routeFor,
  viewOf,
  type ProviderHealth,
} from '../src/outbox/provider-health.ts'

describe('the outage hold policy, as pure functions', () => {
  const now = new Date('2026-12-02T10:00:00Z')
  const at = (seconds: number) => new Date(now.getTime() + seconds * 1000)
  const policy = { ...DEFAULT_HEALTH_POLICY, random: () => 1 }
  const up = (overrides: Partial<ProviderHealth> = {}): ProviderHealth => ({
    provider: 'ses',
    channel: 'email',
    state: 'up',
    failureStreak: 0,
    lastFailureAt: null,
    downSince: null,
    probeIntervalMs: null,
    nextProbeAt: null,
    probeUntil: null,
    ...overrides,
  })
  const down = (overrides: Partial<ProviderHealth> = {}): ProviderHealth =>
    up({ state: 'down', failureStreak: 5, lastFailureAt: now, downSince: now, probeIntervalMs: 5_000, nextProbeAt: at(5), ...overrides })

  it('grows a streak and marks the provider down at the threshold, the first probe one base interval away', () => {
    const four = afterTransientFailures(up(), { count: 4, probe: false }, now, policy)
    expect(four.transition).to.equal(undefined)
    expect(four.health).to.include({ state: 'up', failureStreak: 4 })
    const five = afterTransientFailures(four.health, { count: 1, probe: false }, at(1), policy)
    expect(five.transition).to.equal('down')
    expect(five.health).to.include({ state: 'down', failureStreak: 5, probeIntervalMs: 5_000 })
    expect(five.health.nextProbeAt).to.deep.equal(at(6))
  })

  it('starts a streak again when its last failure is older than the window', () => {
    const old = up({ failureStreak: 4, lastFailureAt: at(-121) })
    expect(afterTransientFailures(old, { count: 1, probe: false }, now, policy).health.failureStreak).to.equal(1)
  })

  it('doubles the probe interval with each failed probe, up to the longest, with jitter from half to all of it', () => {
    let health = down()
    const intervals: number[] = []
    for (let i = 0; i < 4; i++) {
      const change = afterTransientFailures({ ...health, probeUntil: at(1) }, { count: 1, probe: true }, now, policy)
      expect(change.transition).to.equal('probe_failed')
      expect(change.health.probeUntil).to.equal(null)
      intervals.push(change.health.probeIntervalMs!)
      health = change.health
    }
    expect(intervals).to.deep.equal([10_000, 20_000, 20_000, 20_000])
    const halfJitter = afterTransientFailures(down(), { count: 1, probe: true }, now, { ...policy, random: () => 0 })
    expect(halfJitter.health.nextProbeAt).to.deep.equal(at(5))
  })

  it('lets the failure of a send begun before the hold count, without moving the next probe', () => {
    const change = afterTransientFailures(down(), { count: 3, probe: false }, at(2), policy)
    expect(change.transition).to.equal(undefined)
    expect(change.health).to.include({ failureStreak: 8 })
    expect(change.health.nextProbeAt).to.deep.equal(at(5))
  })

  it('lifts the hold on an answer, and ends a streak without a transition when it was up', () => {
    expect(afterAnswer(down()).transition).to.equal('up')
    expect(afterAnswer(down()).health).to.include({ state: 'up', failureStreak: 0, nextProbeAt: null, downSince: null })
    expect(afterAnswer(up({ failureStreak: 3 })).transition).to.equal(undefined)
  })

  it('names what operators see: up, probing (a probe in flight) or down', () => {
    expect(viewOf(undefined, now)).to.equal('up')
    expect(viewOf(down(), now)).to.equal('down')
    expect(viewOf(down({ probeUntil: at(10) }), now)).to.equal('probing')
    expect(viewOf(down({ probeUntil: at(-1) }), now)).to.equal('down')
  })

  describe('routing one message', () => {
    const message = { expires_at: at(600) }
    const states = (...entries: ProviderHealth[]) => new Map(entries.map((entry) => [entry.provider, entry]))

    it('rotates through the chain by attempt number: the attempt after a failure goes to the next provider', () => {
      const chain = ['ses', 'smtp']
      expect([0, 1, 2, 3].map((attempts) => routeFor(chain, attempts, states(), message, now, policy))).to.deep.equal([
        { kind: 'send', provider: 'ses', probe: false },
        { kind: 'send', provider: 'smtp', probe: false },
        { kind: 'send', provider: 'ses', probe: false },
        { kind: 'send', provider: 'smtp', probe: false },
      ])
    })

    it('skips a provider held down while another is up', () => {
      expect(routeFor(['ses', 'smtp'], 0, states(down()), message, now, policy)).to.deep.equal({
        kind: 'send',
        provider: 'smtp',
        probe: false,
      })
    })

    it('probes a first provider held down when its probe is due, even with the second up, so the chain finds its way back', () => {
      expect(routeFor(['ses', 'smtp'], 0, states(down({ nextProbeAt: at(-1) })), message, now, policy)).to.deep.equal({
        kind: 'send',
        provider: 'ses',
        probe: true,
      })
      const inFlight = states(down({ nextProbeAt: at(-1), probeUntil: at(10) }))
      expect(routeFor(['ses', 'smtp'], 0, inFlight, message, now, policy)).to.deep.equal({ kind: 'send', provider: 'smtp', probe: false })
    })

    it('offers a due probe when every provider is down, and holds the message while a probe is in flight', () => {
      expect(routeFor(['ses'], 0, states(down({ nextProbeAt: at(-1) })), message, now, policy)).to.deep.equal({
        kind: 'send',
        provider: 'ses',
        probe: true,
      })
      const held = routeFor(['ses'], 0, states(down({ nextProbeAt: at(-1), probeUntil: at(10) })), message, now, policy)
      expect(held).to.deep.equal({ kind: 'held', until: new Date(at(10).getTime() + 1 + policy.probeMaxMs), providers: ['ses'] })
    })

    it('never holds a message past its expiry: with no time left to wait, the hold lands on the expiry', () => {
      expect(routeFor(['ses'], 0, states(down({ nextProbeAt: at(3_600) })), message, now, policy)).to.deep.equal({
        kind: 'held',
        until: at(599),
        providers: ['ses'],
      })
      const lastSecond = { expires_at: at(0.5) }
      expect(routeFor(['ses'], 0, states(down({ nextProbeAt: at(3_600) })), lastSecond, now, policy)).to.deep.equal({
        kind: 'held',
        until: lastSecond.expires_at,
        providers: ['ses'],
      })
    })
  })
})
