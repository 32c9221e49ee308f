import { expect } from 'chai'
import { eventually } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebhookKit } from './support/webhook-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

/**
 * The events-out fan-out under concurrency (docs/events.md "Delivery"): fan-outs racing each other
 * and the facts being committed, and a fact committed while a fan-out runs. No event may be lost,
 * none may get two deliveries to one endpoint, and every delivery has exactly one job.
 */
describe('attack: the events-out fan-out under concurrency (review2)', () => {
  const f = useWebStack({ worker: false, events: { allowedHosts: ALLOWED } })
  const kit = staffKit(f)
  const steps = useWebhookKit(f, { allowedHosts: ALLOWED })
  let staff: Awaited<ReturnType<typeof kit.staffMember>>
  before(async () => {
    staff = await kit.staffMember()
  })
  afterEach(async () => {
    await f.db.owner('platform.webhook_endpoints').whereNull('disabled_at').update({ disabled_at: new Date() })
    await f.db
      .owner('platform.webhook_deliveries')
      .where({ state: 'pending' })
      .update({ state: 'dead_lettered', finished_at: new Date(), leased_until: null })
  })

  async function endpoint(url: string) {
    const answer = await f.stack.call(
      'POST',
      BASE,
      { url, events: ['identity.created'] },
      { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) },
    )
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201)
    return String(answer.body!.id)
  }
  const identityCreated = async () => {
    const id = crypto.randomUUID()
    await f.db.owner('identity.identities').insert({ id, status: 'active' })
    return id
  }
  const eventIdsOf = async (identityIds: readonly string[]) =>
    (
      await f.db
        .owner('platform.events')
        .where({ type: 'identity.created' })
        .whereRaw(`payload->>'identityId' = ANY(?::text[])`, [identityIds as unknown as string])
    ).map((event: { id: string }) => event.id)

  it('four fan-outs racing 60 facts committed meanwhile: every event gets one delivery per endpoint, each with one job of its own', async function () {
    this.timeout(60_000)
    const endpoints = [await endpoint('http://127.0.0.1:9/a'), await endpoint('http://127.0.0.1:9/b')]
    const identities: string[] = []
    for (let round = 0; round < 3; round++) {
      const facts = Array.from({ length: 20 }, async () => identities.push(await identityCreated()))
      await Promise.all([...facts, steps.fanOut(), steps.fanOut(), steps.fanOut(), steps.fanOut()])
    }
    await steps.fanOut()
    const events = await eventIdsOf(identities)
    expect(events).to.have.length(identities.length)
    const deliveries: { event_id: string; endpoint_id: string; job_id: string }[] = await f.db
      .owner('platform.webhook_deliveries')
      .whereIn('event_id', events)
    expect(deliveries, 'one delivery per event and endpoint').to.have.length(events.length * endpoints.length)
    expect(new Set(deliveries.map((row) => `${row.event_id}/${row.endpoint_id}`)).size).to.equal(deliveries.length)
    const jobs: { id: string; data: { deliveryId: string } }[] = await f.db
      .owner('pgboss.job')
      .where({ name: 'webhook-delivery' })
      .whereIn(
        'id',
        deliveries.map((row) => row.job_id),
      )
    expect(jobs, 'each delivery’s own job, once').to.have.length(deliveries.length)
    expect(await f.db.owner('platform.events').whereIn('id', events).whereNotNull('fan_out_to'), 'nothing left unfanned').to.have.length(0)
  })

  it('a fact committed while a fan-out runs goes out at once through its own wake-up, not at the next schedule minute', async function () {
    this.timeout(60_000)
    const receiver = await startWebhookReceiver()
    const worker = await f.startWorker({ WEBHOOK_ALLOWED_HOSTS: ALLOWED })
    try {
      await endpoint(receiver.url)
      // A fact's transaction stays open (its event appended, its NOTIFY waiting for the commit)…
      const late = crypto.randomUUID()
      const open = await f.db.owner.transaction()
      await open('identity.identities').insert({ id: late, status: 'active' })
      // …while another fact is fanned out and delivered by the running worker.
      const early = await identityCreated()
      await eventually(async () => (receiver.received.length >= 1 ? true : undefined), 'the early event at the endpoint', 20_000)
      const committedAt = Date.now()
      await open.commit()
      await eventually(async () => (receiver.received.length >= 2 ? true : undefined), 'the late event at the endpoint', 20_000)
      expect(Date.now() - committedAt, 'woken by its own commit, not by the minute schedule').to.be.below(15_000)
      expect(receiver.events().map((event) => event.data.identityId)).to.deep.equal([early, late])
    } finally {
      await worker.stop()
      await receiver.stop()
    }
  })
})
