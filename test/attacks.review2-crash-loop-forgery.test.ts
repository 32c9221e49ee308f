import { expect } from 'chai'
import { createWebhookCrashLoopHandler } from '../jobs/webhook-crash-loop.ts'
import type { WebhookJobData } from '../jobs/webhook-deliver.ts'
import { QUEUES } from '../src/db/queues.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebhookKit } from './support/webhook-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

/**
 * A job of another queue that names a delivery and fails into the events-out queues through its
 * dead letter: pg-boss itself then writes the crash-loop row, with a real failed source job, under
 * the worker's login. The web may no longer file such a job (test/attacks.review2-job-routing.test.ts);
 * a row that got there anyway (a previous release's policy, an operator's SQL) must still dead-letter
 * nothing and send nothing twice, since only the delivery's own current job counts.
 */
describe('attack: a forged job fails into the events-out queues through its dead letter (review2)', () => {
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

  /** One pending delivery to `url`, fanned out with its own job. */
  async function pendingDelivery(url: string) {
    const answer = await f.stack.call(
      'POST',
      BASE,
      { url, events: ['identity.created'] },
      { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) },
    )
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201)
    await f.db.owner('identity.identities').insert({ id: crypto.randomUUID(), status: 'active' })
    await steps.fanOut()
    const delivery = await f.db
      .owner('platform.webhook_deliveries')
      .where({ endpoint_id: String(answer.body!.id) })
      .first()
    expect(delivery).to.include({ state: 'pending' })
    return delivery as { id: string; job_id: string; event_id: string }
  }
  /** A delivery-queue job naming the delivery, with `deadLetter`, failed for good by the worker's pg-boss. */
  async function failForged(deliveryId: string, deadLetter: string): Promise<void> {
    const { id } = (
      await f.db.owner.raw(`INSERT INTO pgboss.job (name, data, dead_letter, retry_limit) VALUES (?, ?::jsonb, ?, 0) RETURNING id`, [
        QUEUES.delivery,
        JSON.stringify({ deliveryId: String(deliveryId) }),
        deadLetter,
      ])
    ).rows[0] as { id: string }
    const fetched = await steps.boss.fetch(QUEUES.delivery, { batchSize: 100 })
    expect(fetched.map((job) => job.id)).to.include(id)
    await steps.boss.fail(QUEUES.delivery, id)
    expect((await f.db.owner('pgboss.job').where({ id }).first()).state).to.equal('failed')
  }

  it('a crash-loop row pg-boss wrote from another queue’s failed job dead-letters nothing', async () => {
    const delivery = await pendingDelivery('http://127.0.0.1:9/crash-loop')
    await failForged(delivery.id, QUEUES.webhookCrashLoop)
    const crashLoop = await steps.boss.fetch<WebhookJobData>(QUEUES.webhookCrashLoop, { batchSize: 10 })
    expect(
      crashLoop.map((job) => job.data),
      'pg-boss filed it',
    ).to.deep.equal([{ deliveryId: String(delivery.id) }])
    await createWebhookCrashLoopHandler({ db: steps.db, boss: steps.boss, clock: () => new Date(), logger: f.logs.logger })(crashLoop)
    expect(await f.db.owner('platform.webhook_deliveries').where({ id: delivery.id }).first()).to.include({
      state: 'pending',
      job_id: delivery.job_id,
    })
  })

  it('a webhook-delivery job pg-boss wrote from another queue’s failed job owns nothing: the event goes out once', async () => {
    const receiver = await startWebhookReceiver()
    try {
      const delivery = await pendingDelivery(receiver.url)
      await failForged(delivery.id, QUEUES.webhookDelivery)
      const jobsOf = () =>
        f.db
          .owner('pgboss.job')
          .where({ name: QUEUES.webhookDelivery })
          .whereRaw(`data->>'deliveryId' = ?`, [String(delivery.id)])
      expect(await jobsOf(), 'its own job and the one pg-boss filed').to.have.length(2)
      const step = await steps.deliverDue()
      expect(step.delivered, JSON.stringify(step)).to.equal(1)
      expect(step.stale, JSON.stringify(step)).to.be.greaterThan(0)
      expect((await jobsOf()).map((job: { state: string }) => job.state)).to.deep.equal(['completed', 'completed'])
      expect(receiver.received.map((entry) => entry.id)).to.deep.equal([delivery.event_id])
      expect(await f.db.owner('platform.webhook_deliveries').where({ id: delivery.id }).first()).to.include({ state: 'delivered' })
    } finally {
      await receiver.stop()
    }
  })
})
