import { expect } from 'chai'
import {
  afterAnswer,
  afterFailedProbe,
  DEFAULT_HEALTH_POLICY,
  heldDown,
  viewOf,
  windowTrips,
  type ProviderHealth,
} from '../src/outbox/provider-health.ts'
import { routeFor } from '../src/outbox/provider-route.ts'

describe('the provider breaker, as pure functions', () => {
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
    up({ state: 'down', failureStreak: 20, lastFailureAt: now, downSince: now, probeIntervalMs: 5_000, nextProbeAt: at(5), ...overrides })

  it('holds a provider only past the minimum number of calls and at the failure rate: a third failing never trips it', () => {
    expect(windowTrips({ calls: 19, failures: 19 }, policy), 'too few calls, however bad').to.equal(false)
    expect(windowTrips({ calls: 20, failures: 18 }, policy), '90 % of 20').to.equal(true)
    expect(windowTrips({ calls: 20, failures: 17 }, policy), '85 %').to.equal(false)
    expect(windowTrips({ calls: 100, failures: 34 }, policy), 'a third of the calls').to.equal(false)
    expect(windowTrips({ calls: 100, failures: 89 }, policy)).to.equal(false)
    expect(windowTrips({ calls: 100, failures: 90 }, policy)).to.equal(true)
  })

  it('holds it down with its first probe one base interval away, keeping what the window counted', () => {
    const change = heldDown(up(), 23, now, policy)
    expect(change.transition).to.equal('down')
    expect(change.health).to.include({ state: 'down', failureStreak: 23, probeIntervalMs: 5_000, probeUntil: null })
    expect(change.health.nextProbeAt).to.deep.equal(at(5))
    expect(heldDown(up(), 0, now, { ...policy, random: () => 0 }).health.nextProbeAt, 'half the interval at least').to.deep.equal(at(2.5))
  })

  it('doubles the probe interval with each failed probe, up to the longest, once per lease', () => {
    let health = down()
    const intervals: number[] = []
    for (let i = 0; i < 4; i++) {
      const change = afterFailedProbe({ ...health, probeUntil: at(1) }, now, policy)
      expect(change.transition).to.equal('probe_failed')
      expect(change.health.probeUntil, 'the lease let go').to.equal(null)
      intervals.push(change.health.probeIntervalMs!)
      health = change.health
    }
    expect(intervals).to.deep.equal([10_000, 20_000, 20_000, 20_000])
    // The other probes of the same lease fail after it was let go: the next probe does not move again.
    const second = afterFailedProbe(health, at(1), policy)
    expect(second.transition).to.equal(undefined)
    expect(second.health).to.equal(health)
    expect(afterFailedProbe(up(), now, policy).transition, 'a provider that is up has no probe to fail').to.equal(undefined)
  })

  it('lifts the hold on a probe that proved the provider is there', () => {
    expect(afterAnswer(down()).transition).to.equal('up')
    expect(afterAnswer(down()).health).to.include({ state: 'up', failureStreak: 0, nextProbeAt: null, downSince: null })
    expect(afterAnswer(up()).transition).to.equal(undefined)
  })

  it('names what operators see: up (closed), probing (half-open, a probe in flight) or down (open)', () => {
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

    it("skips a paused provider but not the channel's other one: a relay's throttle never stops SES", () => {
      const smtpPaused = up({ provider: 'smtp', pausedUntil: at(30) })
      expect(routeFor(['smtp', 'ses'], 0, states(smtpPaused), message, now, policy)).to.deep.equal({
        kind: 'send',
        provider: 'ses',
        probe: false,
      })
      expect(routeFor(['smtp'], 0, states(smtpPaused), message, now, policy), 'alone, it waits out its pause').to.deep.equal({
        kind: 'held',
        until: at(30),
        providers: [],
      })
      expect(routeFor(['smtp'], 0, states(up({ provider: 'smtp', pausedUntil: at(-1) })), message, now, policy)).to.deep.equal({
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
