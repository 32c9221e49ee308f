import { readFile } from 'node:fs/promises'
import { expect } from 'chai'
import type { WebhookPost } from '../src/delivery/webhook-sender.ts'
import { receiveOnce, verifyDelivery } from '../client/events-consumer.ts'
import type { Resolve } from '../src/platform/webhook-address-guard.ts'
import { columnsContaining, eventually, uniqueEmail } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebhookKit } from './support/webhook-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { standardWebhooksVerify, startConnectionCounter, startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

describe('signed events out', () => {
  // How hosts resolve, for the web's check at creation and the worker's at connect: one table, changed by tests.
  const dns = new Map<string, string>()
  const resolve: Resolve = async (host) => {
    const address = dns.get(host) ?? (host === '127.0.0.1' ? '127.0.0.1' : undefined)
    if (!address) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
    return [{ address, family: address.includes(':') ? 6 : 4 }]
  }
  const f = useWebStack({ worker: false, events: { allowedHosts: ALLOWED, resolve } })
  const kit = staffKit(f)
  let offsetMs = 0
  const clock = () => new Date(Date.now() + offsetMs)
  const worker = useWebhookKit(f, { allowedHosts: ALLOWED, resolve, clock })
  const deliverDue = (...args: Parameters<typeof worker.deliverDue>) => worker.deliverDue(...args)
  let staff: Awaited<ReturnType<typeof kit.staffMember>>

  before(async () => {
    staff = await kit.staffMember()
  })
  afterEach(async () => {
    offsetMs = 0
    // Each test's endpoints hear only its own facts.
    await f.db.owner('platform.webhook_endpoints').whereNull('disabled_at').update({ disabled_at: new Date() })
    await f.db
      .owner('platform.webhook_deliveries')
      .where({ state: 'pending' })
      .update({ state: 'dead_lettered', finished_at: new Date(), leased_until: null })
  })

  async function subscribe(url: string, events: string[]) {
    const answer = await f.stack.call('POST', BASE, { url, events }, { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) })
    return answer
  }
  async function endpoint(url: string, events: string[]) {
    const answer = await subscribe(url, events)
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201)
    return { id: String(answer.body!.id), secret: String(answer.body!.secret) }
  }
  const deliveriesOf = (endpointId: string) => f.db.owner('platform.webhook_deliveries').where({ endpoint_id: endpointId }).orderBy('id')

  it('appends one event per fact in the fact’s transaction and delivers it once to every endpoint subscribed to its type', async () => {
    const before = await kit.account(uniqueEmail('before'))
    const [a, b, c] = [await startWebhookReceiver(), await startWebhookReceiver(), await startWebhookReceiver()]
    try {
      const endpointA = await endpoint(a.url, ['identity.created', 'sign_in_method.added'])
      const endpointB = await endpoint(b.url, ['identity.created'])
      const endpointC = await endpoint(c.url, ['password.changed'])
      const person = await kit.account(uniqueEmail('after'))

      const first = await deliverDue()
      expect(first).to.include({ claimed: 3, delivered: 3, retried: 0, deadLettered: 0 })
      expect(a.events().map((event) => event.type)).to.have.members(['identity.created', 'sign_in_method.added'])
      expect(b.events().map((event) => [event.type, event.data.identityId])).to.deep.equal([['identity.created', person.identityId]])
      expect(c.received, 'an endpoint hears only the types it subscribed to').to.have.length(0)
      const heard = [...a.events(), ...b.events()].map((event) => event.data.identityId)
      expect(heard, 'nothing that happened before the endpoint subscribed').not.to.include(before.identityId)
      for (const [receiver, secret] of [
        [a, endpointA.secret],
        [b, endpointB.secret],
      ] as const)
        for (const received of receiver.received)
          expect(standardWebhooksVerify(secret, received), 'Standard Webhooks signature').to.equal(true)
      expect(a.received.find((entry) => entry.body.includes('identity.created'))!.id).to.equal(b.received[0]!.id)

      expect(await deliverDue(), 'delivered means not again').to.include({ claimed: 0 })
      expect((await deliveriesOf(endpointA.id)).map((row) => row.state)).to.deep.equal(['delivered', 'delivered'])
      expect(await deliveriesOf(endpointC.id)).to.have.length(0)
    } finally {
      await Promise.all([a.stop(), b.stop(), c.stop()])
    }
  })

  it('the running worker delivers an event after its commit, with no pass called by hand', async () => {
    const receiver = await startWebhookReceiver()
    const worker = await f.startWorker({ WEBHOOK_ALLOWED_HOSTS: ALLOWED })
    try {
      const { secret } = await endpoint(receiver.url, ['identity.created'])
      // The fact written straight (a sign-up through the API would race the running worker for its code).
      const person = { identityId: crypto.randomUUID() }
      await f.db.owner('identity.identities').insert({ id: person.identityId, status: 'active' })
      // No wall-clock promise here (a loaded machine is slow): the worker's own loop must deliver it at all.
      await eventually(async () => (receiver.received.length > 0 ? true : undefined), 'the delivery by the running worker', 30_000)
      expect(receiver.events().map((event) => [event.type, event.data.identityId])).to.deep.equal([['identity.created', person.identityId]])
      expect(standardWebhooksVerify(secret, receiver.received[0]!)).to.equal(true)
    } finally {
      await worker.stop()
      await receiver.stop()
    }
  })

  it('shows in docs/events.md, verbatim, the consumer this file runs as its receiver', async () => {
    const page = await readFile(new URL('../docs/events.md', import.meta.url), 'utf8')
    const example = await readFile(new URL('../client/events-consumer.ts', import.meta.url), 'utf8')
    expect(page).to.include('```ts\n' + example + '```')
  })

  it('leaves no event behind when the fact’s transaction rolls back', async () => {
    const id = crypto.randomUUID()
    const rolledBack = new Error('rolled back')
    const outcome = await f.db.owner
      .transaction(async (trx) => {
        await trx('identity.identities').insert({ id, status: 'active' })
        expect(await trx('platform.events').whereRaw(`payload->>'identityId' = ?`, [id]), 'seen inside the transaction').to.have.length(1)
        throw rolledBack
      })
      .catch((error: unknown) => error)
    expect(outcome).to.equal(rolledBack)
    expect(await f.db.owner('platform.events').whereRaw(`payload->>'identityId' = ?`, [id])).to.have.length(0)
  })

  it('a worker that dies between send and record sends again with the same webhook-id, and the inbox applies it once', async () => {
    await f.db.owner.raw(
      'CREATE TABLE IF NOT EXISTS webhook_inbox (event_id uuid PRIMARY KEY, type text NOT NULL, received_at timestamptz NOT NULL DEFAULT now())',
    )
    await f.db.owner.raw('CREATE TABLE IF NOT EXISTS webhook_effects (event_id uuid NOT NULL, type text NOT NULL)')
    let secret = ''
    const receiver = await startWebhookReceiver(async (received) => {
      const event = verifyDelivery(secret, received.headers as Record<string, string>, received.body)
      await receiveOnce(f.db.owner, event, async (trx) => {
        await trx('webhook_effects').insert({ event_id: event.id, type: event.type })
      })
      return { status: 204 }
    })
    try {
      const created = await endpoint(receiver.url, ['identity.created'])
      secret = created.secret
      await kit.account(uniqueEmail('crash'))
      // The process dies after the receiver answered and before the record step ran.
      const crashing: WebhookPost = async (request) => {
        await worker.post(request)
        throw Object.assign(new Error('worker killed'), { code: 'SIGKILL' })
      }
      expect(await deliverDue({ post: crashing })).to.include({ claimed: 1, delivered: 0, failed: 1 })
      // Nothing was recorded: the attempt counted at the claim, the job back with pg-boss for its retry.
      const [unrecorded] = await deliveriesOf(created.id)
      expect(unrecorded).to.include({ state: 'pending', attempt_count: 1, last_status_code: null })
      expect((await f.db.owner('pgboss.job').where({ id: unrecorded.job_id }).first()).state).to.equal('retry')
      offsetMs = 31_000
      expect(await deliverDue()).to.include({ claimed: 1, delivered: 1 })

      expect(receiver.received).to.have.length(2)
      expect(receiver.received[1]!.id, 'the same webhook-id on the retry').to.equal(receiver.received[0]!.id)
      expect(await f.db.owner('webhook_effects').where({ event_id: receiver.received[0]!.id }), 'applied exactly once').to.have.length(1)
    } finally {
      await receiver.stop()
    }
  })

  it('retries 503 on the schedule and 429 at its Retry-After, with one webhook-id throughout', async () => {
    const answers = [{ status: 503 }, { status: 429, headers: { 'retry-after': '120' } }, { status: 200 }]
    const receiver = await startWebhookReceiver(() => answers.shift() ?? { status: 200 })
    try {
      const { id } = await endpoint(receiver.url, ['sign_in_method.added'])
      await kit.account(uniqueEmail('retry'))
      expect(await deliverDue()).to.include({ retried: 1 })
      const [afterFirst] = await deliveriesOf(id)
      expect(afterFirst).to.include({ state: 'pending', attempt_count: 1, last_status_code: 503, last_failure: 'retryable_status' })
      expect(afterFirst.next_attempt_at.getTime() - clock().getTime()).to.be.within(3_000, 5_100)

      expect(await deliverDue(), 'not before its time').to.include({ claimed: 0 })
      offsetMs = 5_100
      expect(await deliverDue()).to.include({ retried: 1 })
      const [afterSecond] = await deliveriesOf(id)
      // The schedule says 60 s; the receiver asked for 120 s and the later one wins.
      expect(afterSecond.next_attempt_at.getTime() - clock().getTime()).to.be.within(118_000, 120_100)
      offsetMs += 61_000
      expect(await deliverDue()).to.include({ claimed: 0 })
      offsetMs += 60_000
      expect(await deliverDue()).to.include({ delivered: 1 })
      expect(new Set(receiver.received.map((entry) => entry.id)).size).to.equal(1)
      expect(receiver.received).to.have.length(3)
    } finally {
      await receiver.stop()
    }
  })

  it('dead-letters a 400 at once and a 500 once attempts run out; staff redrive sends them again with the same webhook-id', async () => {
    let status = 400
    const receiver = await startWebhookReceiver(() => ({ status }))
    try {
      const { id } = await endpoint(receiver.url, ['identity.created'])
      await kit.account(uniqueEmail('rejected'))
      expect(await deliverDue()).to.include({ deadLettered: 1 })
      expect((await deliveriesOf(id))[0]).to.include({ state: 'dead_lettered', last_status_code: 400, last_failure: 'rejected' })

      const page = await f.stack.call('GET', `${BASE}/${id}/deliveries`, undefined, staff.auth)
      expect(page.status).to.equal(200)
      const item = (page.body!.items as Record<string, unknown>[])[0]!
      expect(item).to.include({
        eventType: 'identity.created',
        webhookId: receiver.received[0]!.id,
        state: 'dead_lettered',
        attempts: 1,
        lastStatusCode: 400,
      })

      status = 500
      const redrive = await f.stack.call('POST', `${BASE}/${id}/redrives`, undefined, {
        ...staff.auth,
        'x-elevation-token': await kit.elevate(staff),
      })
      expect(redrive.status).to.equal(200)
      expect(redrive.body).to.deep.equal({ redriven: 1 })
      for (const step of [0, 5_100, 60_100]) {
        offsetMs += step
        await deliverDue()
      }
      expect((await deliveriesOf(id))[0]).to.include({ state: 'dead_lettered', attempt_count: 3, last_failure: 'retries_exhausted' })

      status = 204
      await f.stack.call('POST', `${BASE}/${id}/redrives`, undefined, { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) })
      expect(await deliverDue()).to.include({ delivered: 1 })
      expect(new Set(receiver.received.map((entry) => entry.id)).size, 'one webhook-id through both redrives').to.equal(1)
      expect(receiver.received).to.have.length(5)
    } finally {
      await receiver.stop()
    }
  })

  it('refuses at creation an endpoint whose host is an IP literal or resolves to a loopback, private or link-local address', async () => {
    dns.set('loopback.example.test', '127.0.0.1')
    dns.set('metadata.example.test', '169.254.169.254')
    dns.set('mapped.example.test', '::ffff:10.0.0.7')
    dns.set('cgnat.example.test', '100.64.1.2')
    const before = await f.db.owner('platform.webhook_endpoints').count({ n: '*' })
    for (const url of [
      'https://loopback.example.test/hooks',
      'https://metadata.example.test/latest',
      'https://mapped.example.test/hooks',
      'https://cgnat.example.test/hooks',
      'https://10.1.2.3/hooks',
      'https://[::1]/hooks',
      'https://[fe80::1]/hooks',
      'https://0.0.0.0/hooks',
    ]) {
      const answer = await subscribe(url, ['identity.created'])
      expect(answer.status, url).to.equal(422)
      expect(answer.body?.code, url).to.equal('webhook_url_forbidden_address')
    }
    const insecure = await subscribe('http://public.example.test/hooks', ['identity.created'])
    expect([insecure.status, insecure.body?.code]).to.deep.equal([422, 'webhook_url_not_https'])
    expect(await f.db.owner('platform.webhook_endpoints').count({ n: '*' }), 'nothing written').to.deep.equal(before)
  })

  it('a host that resolved publicly at creation and privately at send is refused at connect: nothing reaches it, the delivery is dead-lettered', async () => {
    const target = await startConnectionCounter()
    try {
      dns.set('moving.example.test', '93.184.216.34')
      const { id } = await endpoint(`https://moving.example.test:${target.port}/hooks`, ['identity.created'])
      // The attacker's DNS now answers with an address inside our network.
      dns.set('moving.example.test', '127.0.0.1')
      await kit.account(uniqueEmail('rebind'))
      const counts = await deliverDue()
      expect(target.connections(), 'no connection reached the private address').to.equal(0)
      expect(counts).to.include({ claimed: 1, deadLettered: 1 })
      expect((await deliveriesOf(id))[0]).to.include({ state: 'dead_lettered', last_failure: 'address_refused', last_status_code: null })
    } finally {
      await target.stop()
    }
  })

  it('a DNS blip at send time (the host does not resolve once) retries the delivery instead of dead-lettering the event', async () => {
    dns.set('blip.example.test', '93.184.216.34')
    const { id } = await endpoint('https://blip.example.test/hooks', ['identity.created'])
    dns.delete('blip.example.test')
    await kit.account(uniqueEmail('blip'))
    const counts = await deliverDue()
    expect(counts).to.include({ claimed: 1, deadLettered: 0 })
    expect((await deliveriesOf(id))[0]).to.include({ state: 'pending', last_failure: 'connection_failed' })
  })

  it('keeps secrets out of events: payloads carry ids and masked destinations, the signing secret is stored only sealed', async () => {
    const receiver = await startWebhookReceiver()
    try {
      const { secret } = await endpoint(receiver.url, ['message.accepted', 'sign_in_method.added', 'identity.created'])
      const email = uniqueEmail('private')
      await kit.account(email)
      const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first()
      const code = await kit.sealedCode(message.id).catch(() => undefined)
      await deliverDue()
      const bodies = receiver.received.map((entry) => entry.body).join('\n')
      expect(bodies).to.include('maskedDestination').and.to.include('maskedIdentifier')
      for (const secretValue of [email, email.split('@')[0]!, secret, secret.slice(6), 'correct horse battery', ...(code ? [code] : [])])
        expect(bodies, 'no secret in a delivered body').not.to.include(secretValue)
      for (const needle of [email, secret.slice(6)]) {
        const columns = await columnsContaining(f.db.owner, needle)
        expect(
          columns.filter((column) => column.startsWith('platform.') || column.startsWith('pgboss.')),
          needle === email ? 'address' : 'secret',
        ).to.deep.equal([])
      }
    } finally {
      await receiver.stop()
    }
  })
})
