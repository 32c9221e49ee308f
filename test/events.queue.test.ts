import { expect } from 'chai'
import { eventually } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { startHangingReceiver, startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

describe('events out on pg-boss jobs', () => {
  const f = useWebStack({ worker: false, events: { allowedHosts: ALLOWED } })
  const kit = staffKit(f)
  let staff: Awaited<ReturnType<typeof kit.staffMember>>
  before(async () => {
    staff = await kit.staffMember()
  })
  afterEach(async () => {
    await f.db.owner('platform.webhook_endpoints').whereNull('disabled_at').update({ disabled_at: new Date() })
  })

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
      // The slow endpoint holds its request open; the next events must not wait for it.
      const later = [await identityCreated(), await identityCreated(), await identityCreated(), await identityCreated()]
      await eventually(async () => (fast.received.length >= 5 ? true : undefined), 'every event at the fast endpoint', 60_000)
      expect(fast.events().map((event) => event.data.identityId)).to.include.members(later)
      expect(abandonedAtArrival, 'each fast delivery arrived while the slow endpoint still hung').to.deep.equal([0, 0, 0, 0, 0])
      expect(slow.abandoned()).to.equal(0)
    } finally {
      slow.release()
      await worker.stop()
      await Promise.all([slow.stop(), fast.stop()])
    }
  })
})
