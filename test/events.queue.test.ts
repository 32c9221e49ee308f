import type { Knex } from 'knex'
import { expect } from 'chai'
import { createWebhookCrashLoopHandler } from '../jobs/webhook-crash-loop.ts'
import type { WebhookJobData } from '../jobs/webhook-deliver.ts'
import { QUEUES } from '../src/db/queues.ts'
import type { WebhookPost } from '../src/delivery/webhook-sender.ts'
import { WEBHOOK_WORK } from '../src/runtime/events-out.ts'
import { eventually } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebhookKit } from './support/webhook-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { startHangingReceiver, startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

describe('events out on pg-boss jobs', () => {
  const f = useWebStack({ worker: false, events: { allowedHosts: ALLOWED } })
  const kit = staffKit(f)
  let offsetMs = 0
  const clock = () => new Date(Date.now() + offsetMs)
  const steps = useWebhookKit(f, { allowedHosts: ALLOWED, clock })
  let staff: Awaited<ReturnType<typeof kit.staffMember>>
  before(async () => {
    staff = await kit.staffMember()
  })
  afterEach(async () => {
    offsetMs = 0
    await f.db.owner('platform.webhook_endpoints').whereNull('disabled_at').update({ disabled_at: new Date() })
    await f.db
      .owner('platform.webhook_deliveries')
      .where({ state: 'pending' })
      .update({ state: 'dead_lettered', finished_at: new Date(), leased_until: null })
  })
  const deliveriesOf = (endpointId: string) => f.db.owner('platform.webhook_deliveries').where({ endpoint_id: endpointId }).orderBy('id')

  async function endpoint(url: string, events: string[]) {
    const answer = await f.stack.call('POST', BASE, { url, events }, { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) })
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201)
    return { id: String(answer.body!.id), secret: String(answer.body!.secret) }
  }
  /** A fact written straight (a sign-up through the API would race the running worker for its code). */
  const identityCreated = async () => {
    const id = crypto.randomUUID()
    await f.db.owner('identity.identities').insert({ id, status: 'active' })
    return id
  }

  it('one endpoint hanging until the send timeout does not delay another: the fast one hears every event while the slow one still hangs', async function () {
    this.timeout(120_000)
    const slow = await startHangingReceiver()
    // What the slow endpoint had given up on (its requests closed by the send timeout) when each fast delivery arrived.
    const abandonedAtArrival: number[] = []
    const fast = await startWebhookReceiver(() => {
      abandonedAtArrival.push(slow.abandoned())
      return { status: 204 }
    })
    const worker = await f.startWorker({ WEBHOOK_ALLOWED_HOSTS: ALLOWED, SEND_TIMEOUT_MS: 15_000 })
    try {
      await endpoint(slow.url, ['identity.created'])
      await endpoint(fast.url, ['identity.created'])
      await identityCreated()
      await eventually(async () => (slow.open() >= 1 && fast.received.length >= 1 ? true : undefined), 'the first event at both', 30_000)
      // The slow endpoint holds its request open; the next events must not wait for it, and more of
      // them than its cap lets it hold in flight.
      const later: string[] = []
      for (let n = 0; n < WEBHOOK_WORK.groupConcurrency + 4; n++) later.push(await identityCreated())
      const all = later.length + 1
      await eventually(async () => (fast.received.length >= all ? true : undefined), 'every event at the fast endpoint', 60_000)
      expect(fast.events().map((event) => event.data.identityId)).to.include.members(later)
      expect(abandonedAtArrival, 'each fast delivery arrived while the slow endpoint still hung').to.deep.equal(Array(all).fill(0))
      await eventually(
        async () => (slow.open() >= WEBHOOK_WORK.groupConcurrency ? true : undefined),
        'the slow endpoint at its cap',
        30_000,
      )
      expect(slow.open(), "the slow endpoint's deliveries in flight, capped across the fleet").to.equal(WEBHOOK_WORK.groupConcurrency)
      expect(slow.abandoned()).to.equal(0)
    } finally {
      slow.release()
      await worker.stop()
      await Promise.all([slow.stop(), fast.stop()])
    }
  })

  it('fans each event out to a delivery row and its own webhook-delivery job: the job carries the delivery id only, in its endpoint’s group', async () => {
    const a = await endpoint('http://127.0.0.1:9/a', ['identity.created', 'password.changed'])
    const b = await endpoint('http://127.0.0.1:9/b', ['identity.created'])
    await identityCreated()
    expect(await f.db.owner('platform.webhook_deliveries').whereIn('endpoint_id', [a.id, b.id]), 'not before the fan-out').to.have.length(0)
    expect(await steps.fanOut()).to.include({ events: 1, queued: 2 })
    for (const endpointId of [a.id, b.id]) {
      const [delivery] = await deliveriesOf(endpointId)
      const job = await f.db.owner('pgboss.job').where({ id: delivery.job_id }).first()
      expect(job).to.include({ name: QUEUES.webhookDelivery, state: 'created', group_id: endpointId })
      expect(job.data).to.deep.equal({ deliveryId: String(delivery.id) })
    }
    expect(await steps.fanOut(), 'fanned out once').to.include({ events: 0, queued: 0 })
  })

  it('an event committed while no worker listened goes out when a worker starts', async function () {
    this.timeout(60_000)
    const receiver = await startWebhookReceiver()
    try {
      await endpoint(receiver.url, ['identity.created'])
      const identityId = await identityCreated()
      const worker = await f.startWorker({ WEBHOOK_ALLOWED_HOSTS: ALLOWED })
      try {
        await eventually(async () => (receiver.received.length > 0 ? true : undefined), 'the delivery after the start', 30_000)
      } finally {
        await worker.stop()
      }
      expect(receiver.events().map((event) => event.data.identityId)).to.deep.equal([identityId])
      expect(f.logs.text(), 'the queues, handlers and schedule started cleanly').not.to.match(/pg-boss (error|warning)/)
    } finally {
      await receiver.stop()
    }
  })

  it('a delivery job that crashes its worker past pg-boss’s retry limit dead-letters its delivery worker_crash_loop; a forged crash-loop job changes nothing', async () => {
    const receiver = await startWebhookReceiver()
    try {
      const { id } = await endpoint(receiver.url, ['identity.created'])
      await identityCreated()
      await identityCreated()
      await steps.fanOut()
      const [crashing, other] = await deliveriesOf(id)
      // The handler dies on one event every time it is tried (a poison delivery); the other goes out.
      const post: WebhookPost = async (request) => {
        if (request.headers['webhook-id'] === crashing.event_id) throw Object.assign(new Error('handler crashed'), { code: 'EBOOM' })
        return await steps.post(request)
      }
      const failed: number[] = []
      for (let run = 0; run < 4; run++) {
        offsetMs += 60_000
        failed.push((await steps.deliverDue({ post })).failed)
      }
      expect(failed, 'the first try and pg-boss’s three retries').to.deep.equal([1, 1, 1, 1])
      expect((await f.db.owner('pgboss.job').where({ id: crashing.job_id }).first()).state).to.equal('failed')
      const handler = createWebhookCrashLoopHandler({ db: steps.db, boss: steps.boss, clock, logger: f.logs.logger })
      const crashLoop = await steps.boss.fetch<WebhookJobData>(QUEUES.webhookCrashLoop, { batchSize: 10 })
      expect(crashLoop.map((job) => job.data)).to.deep.equal([{ deliveryId: String(crashing.id) }])
      await handler(crashLoop)
      expect(await f.db.owner('platform.webhook_deliveries').where({ id: crashing.id }).first()).to.include({
        state: 'dead_lettered',
        last_failure: 'worker_crash_loop',
      })
      expect(await f.db.owner('platform.webhook_deliveries').where({ id: other.id }).first()).to.include({ state: 'delivered' })

      // A row anyone else puts in the crash-loop queue dead-letters nothing.
      await identityCreated()
      await steps.fanOut()
      const pending = (await deliveriesOf(id)).at(-1)
      await steps.boss.send(QUEUES.webhookCrashLoop, { deliveryId: String(pending.id) })
      await handler(await steps.boss.fetch<WebhookJobData>(QUEUES.webhookCrashLoop, { batchSize: 10 }))
      expect(await f.db.owner('platform.webhook_deliveries').where({ id: pending.id }).first()).to.include({ state: 'pending' })
      expect(new Set(receiver.received.map((entry) => entry.id))).to.deep.equal(new Set([other.event_id]))
    } finally {
      await receiver.stop()
    }
  })

  it('beside the previous release’s row-claiming worker: neither takes the other’s deliveries, and each event goes out once', async () => {
    const receiver = await startWebhookReceiver()
    try {
      const { id } = await endpoint(receiver.url, ['identity.created'])
      // Two deliveries as the previous release's trigger wrote them (no job), then one fact of this release.
      const legacy: { id: string; event_id: string }[] = []
      for (let n = 0; n < 2; n++) {
        const [event] = await f.db
          .owner('platform.events')
          .insert({ type: 'identity.created', payload: { identityId: crypto.randomUUID() } })
          .returning('id')
        const [row] = await f.db
          .owner('platform.webhook_deliveries')
          .insert({ event_id: event.id, endpoint_id: id, next_attempt_at: new Date() })
          .returning(['id', 'event_id'])
        legacy.push({ id: String(row.id), event_id: row.event_id })
      }
      await identityCreated()
      // The previous release's worker leases the first legacy delivery, then dies before sending it.
      const leased = await previousReleaseClaim(steps.db, clock(), 30_000, 1)
      expect(leased).to.deep.equal([legacy[0]!.id])

      await steps.fanOut()
      expect(await previousReleaseClaim(steps.db, clock(), 30_000, 10), 'nothing a job owns, nothing leased').to.deep.equal([])
      expect(await steps.deliverDue()).to.include({ delivered: 2 })
      expect(await f.db.owner('platform.webhook_deliveries').where({ id: legacy[0]!.id }).first(), 'left to its lease').to.include({
        state: 'pending',
        job_id: null,
      })
      // Its lease lapses: the delivery gets a job of its own, with the same webhook-id.
      offsetMs = 31_000
      expect(await steps.deliverDue()).to.include({ delivered: 1 })
      expect((await deliveriesOf(id)).map((row) => row.state)).to.deep.equal(['delivered', 'delivered', 'delivered'])
      const heard = receiver.received.map((entry) => entry.id)
      expect(heard).to.have.length(3)
      expect(new Set(heard).size, 'each event once').to.equal(3)
      expect(heard).to.include.members(legacy.map((row) => row.event_id))
    } finally {
      await receiver.stop()
    }
  })
})

/**
 * The claim of the previous release's worker, copied from src/platform/webhook-deliveries-sql.ts at
 * commit 1ba9c38 (`claimDueDeliveries`), as it keeps running beside this release during a rolling
 * upgrade; returns the ids it leased.
 */
async function previousReleaseClaim(db: Knex, now: Date, leaseMs: number, limit: number): Promise<string[]> {
  const leaseUntil = new Date(now.getTime() + leaseMs)
  const { rows } = await db.raw<{ rows: { id: string }[] }>(
    `WITH due AS (
       SELECT d.id FROM platform.webhook_deliveries d
        WHERE d.state = 'pending' AND d.next_attempt_at <= :now AND (d.leased_until IS NULL OR d.leased_until <= :now)
        ORDER BY d.next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED
     ), leased AS (
       UPDATE platform.webhook_deliveries d SET leased_until = :leaseUntil, attempt_count = d.attempt_count + 1
         FROM due WHERE d.id = due.id
       RETURNING d.id, d.event_id, d.endpoint_id, d.attempt_count
     )
     SELECT l.id::text, l.event_id, ev.type, ev.occurred_at, ev.payload, l.endpoint_id, e.url, e.secret_envelope,
            e.previous_secret_envelope, e.previous_secret_until, l.attempt_count
       FROM leased l JOIN platform.events ev ON ev.id = l.event_id JOIN platform.webhook_endpoints e ON e.id = l.endpoint_id`,
    { now, leaseUntil, limit },
  )
  return rows.map((row) => row.id)
}
