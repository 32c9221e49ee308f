import { expect } from 'chai'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'
import { checkedFetch } from './support/api-check.ts'

const WEB_METRICS = [
  'sealpost_outbox_messages',
  'sealpost_outbox_oldest_due_pending_age_seconds',
  'sealpost_outbox_dead_letters_last_24h',
  'sealpost_outbox_queue_jobs',
  'sealpost_outbox_metrics_scrape_ok',
]
const WORKER_METRICS = [
  'sealpost_delivery_attempts_total',
  'sealpost_dead_letters_total',
  'sealpost_send_duration_seconds',
  'sealpost_commit_to_send_seconds',
  'sealpost_maintenance_rows_total',
  'sealpost_messages_without_provider_total',
]

describe('metrics', () => {
  // The web reads "now" from this clock: moving it forward stands in for time passing with no worker.
  let offsetMs = 0
  const f = useWebStack({ worker: false, clock: () => new Date(Date.now() + offsetMs) })
  const lag = (text: string) => Number(/^sealpost_outbox_oldest_due_pending_age_seconds (\S+)$/m.exec(text)?.[1])
  const scrape = async () => {
    const response = await checkedFetch(`${f.stack.web.url}/metrics`)
    expect(response.status).to.equal(200)
    expect(response.headers.get('content-type')).to.match(/^text\/plain/)
    return await response.text()
  }

  it('exposes the backlog gauges; the lag rises while no worker runs and falls once one does', async () => {
    expect((await f.stack.call('POST', '/password-recoveries', { identifier: uniqueEmail('nobody') })).status).to.equal(202)
    const email = uniqueEmail('waiting')
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })).status).to.equal(202)
    const idle = await scrape()
    for (const name of WEB_METRICS) expect(idle, name).to.include(`# TYPE ${name} gauge`)
    expect(idle).to.match(/^sealpost_outbox_messages\{state="pending"\} 1$/m)
    expect(idle).to.match(/^sealpost_outbox_metrics_scrape_ok 1$/m)

    offsetMs = 90_000
    const stalled = await scrape()
    expect(lag(stalled), 'the lag after 90 s without a worker').to.be.within(89, 92)

    const worker = await f.startWorker({ WORKER_METRICS_PORT: 0 })
    try {
      await eventually(async () => (lag(await scrape()) === 0 ? true : undefined), 'the lag to fall once a worker runs')
      await eventually(
        async () => (/^sealpost_outbox_messages\{state="published"\} 1$/m.test(await scrape()) ? true : undefined),
        'the message to be published',
      )
      const workerText = await (await fetch(`${worker.metricsUrl}/metrics`)).text()
      for (const name of WORKER_METRICS) expect(workerText, name).to.include(`# TYPE ${name}`)
      expect(workerText).to.match(/^sealpost_delivery_attempts_total\{outcome="published",failure_class=""\} 1$/m)
      expect(workerText).to.match(/^sealpost_send_duration_seconds_count\{channel="email"\} 1$/m)
      expect(workerText).to.match(/^sealpost_commit_to_send_seconds_count\{channel="email"\} 1$/m)
      expect(workerText).not.to.include(email)
    } finally {
      await worker.stop()
    }
  })

  it("shows each provider's outage hold as sealpost_provider_state: 0 up, 1 probing, 2 held down", async () => {
    const worker = await f.startWorker()
    await worker.stop()
    // The worker listed its provider at startup: up.
    expect(await scrape()).to.match(/^sealpost_provider_state\{provider="ses"\} 0$/m)
    const now = new Date()
    const held = {
      state: 'down',
      failure_streak: 5,
      down_since: now,
      probe_interval_ms: 5_000,
      next_probe_at: new Date(now.getTime() + 60_000),
    }
    await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).update(held)
    expect(await scrape()).to.match(/^sealpost_provider_state\{provider="ses"\} 2$/m)
    await f.db
      .owner('outbox.provider_states')
      .where({ provider: 'ses' })
      .update({ probe_until: new Date(now.getTime() + 600_000) })
    expect(await scrape()).to.match(/^sealpost_provider_state\{provider="ses"\} 1$/m)
  })
})
