import { expect } from 'chai'
import { columnsContaining, uniqueEmail } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebhookKit } from './support/webhook-kit.ts'
import { useWebStack } from './support/web-stack.ts'
import { standardWebhooksVerify, startWebhookReceiver } from './support/webhook-receiver.ts'

const BASE = '/platform-admin/webhook-endpoints'
const ALLOWED = ['127.0.0.1']

describe('staff: webhook endpoints', () => {
  const f = useWebStack({ worker: false, events: { allowedHosts: ALLOWED } })
  const kit = staffKit(f)
  const worker = useWebhookKit(f, { allowedHosts: ALLOWED })
  let staff: Awaited<ReturnType<typeof kit.staffMember>>

  before(async () => {
    staff = await kit.staffMember()
  })

  const elevated = async () => ({ ...staff.auth, 'x-elevation-token': await kit.elevate(staff) })
  const endpointCount = async () => Number((await f.db.owner('platform.webhook_endpoints').count({ n: '*' }))[0]!.n)

  it('answers someone who is not staff 403 not_staff on every route, and writes nothing', async () => {
    const someone = await kit.account(uniqueEmail('someone'))
    const before = await endpointCount()
    const headers = { ...someone.auth, 'x-elevation-token': await kit.elevate(someone) }
    const create = await f.stack.call('POST', BASE, { url: 'http://127.0.0.1:9/hooks', events: ['identity.created'] }, headers)
    expect([create.status, create.body?.code]).to.deep.equal([403, 'not_staff'])
    expect((await f.stack.call('GET', BASE, undefined, someone.auth)).status).to.equal(403)
    expect(await endpointCount()).to.equal(before)
  })

  it('creates only with a fresh elevation: without one it is 403 elevation_required and nothing is written', async () => {
    const before = await endpointCount()
    const answer = await f.stack.call('POST', BASE, { url: 'http://127.0.0.1:9/hooks', events: ['identity.created'] }, staff.auth)
    expect([answer.status, answer.body?.code]).to.deep.equal([403, 'elevation_required'])
    expect(await endpointCount()).to.equal(before)
  })

  it('refuses bad input with a 422 problem and writes nothing', async () => {
    const before = await endpointCount()
    for (const body of [
      { url: 'http://127.0.0.1:9/hooks', events: ['identity.exploded'] },
      { url: 'http://127.0.0.1:9/hooks', events: [] },
      { url: 'http://127.0.0.1:9/hooks', events: ['identity.created'], secret: 'mine' },
      { url: 'not a url', events: ['identity.created'] },
      { events: ['identity.created'] },
    ]) {
      const answer = await f.stack.call('POST', BASE, body, await elevated())
      expect(answer.status, JSON.stringify(body)).to.equal(422)
      expect(answer.headers.get('content-type')).to.match(/^application\/problem\+json/)
    }
    expect(await endpointCount()).to.equal(before)
  })

  it('shows the secret once, stores it only sealed, lists endpoints without it and audits the creation', async () => {
    const created = await f.stack.call('POST', BASE, { url: 'http://127.0.0.1:9/hooks', events: ['identity.created'] }, await elevated())
    expect(created.status).to.equal(201)
    const { id, secret } = created.body as { id: string; secret: string }
    expect(secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/)
    const list = await f.stack.call('GET', BASE, undefined, staff.auth)
    expect(JSON.stringify(list.body)).not.to.include(secret.slice(6))
    expect((list.body!.items as { id: string }[]).map((item) => item.id)).to.include(id)
    expect(await columnsContaining(f.db.owner, secret.slice(6))).to.deep.equal([])
    const audit = await f.db.owner('platform.audit_records').where({ action: 'webhook_endpoint.created', subject: id })
    expect(audit).to.have.length(1)
    expect(audit[0].actor).to.equal(staff.identityId)
  })

  it('rotates the secret: both sign during the overlap, and the new one is shown once', async () => {
    const receiver = await startWebhookReceiver()
    try {
      const created = await f.stack.call('POST', BASE, { url: receiver.url, events: ['identity.created'] }, await elevated())
      const { id, secret: oldSecret } = created.body as { id: string; secret: string }
      const rotated = await f.stack.call('POST', `${BASE}/${id}/secret`, undefined, await elevated())
      expect(rotated.status).to.equal(201)
      const newSecret = String(rotated.body!.secret)
      expect(newSecret).not.to.equal(oldSecret)
      await kit.account(uniqueEmail('rotation'))
      await worker.deliverDue()
      const delivery = receiver.received.find((entry) => entry.body.includes('identity.created'))!
      expect(delivery.signature.split(' ')).to.have.length(2)
      expect(standardWebhooksVerify(newSecret, delivery)).to.equal(true)
      expect(standardWebhooksVerify(oldSecret, delivery)).to.equal(true)
      expect(standardWebhooksVerify('whsec_' + Buffer.alloc(32).toString('base64'), delivery)).to.equal(false)
    } finally {
      await receiver.stop()
    }
  })

  it('disables an endpoint: its pending deliveries stop and it hears nothing more; unknown ids are 404', async () => {
    const created = await f.stack.call('POST', BASE, { url: 'http://127.0.0.1:9/hooks', events: ['identity.created'] }, await elevated())
    const id = String(created.body!.id)
    await kit.account(uniqueEmail('pending'))
    await worker.fanOut()
    expect(await f.db.owner('platform.webhook_deliveries').where({ endpoint_id: id, state: 'pending' })).to.have.length(1)
    expect((await f.stack.call('DELETE', `${BASE}/${id}`, undefined, await elevated())).status).to.equal(204)
    expect(await f.db.owner('platform.webhook_deliveries').where({ endpoint_id: id, state: 'pending' })).to.have.length(0)
    await kit.account(uniqueEmail('after-disable'))
    await worker.fanOut()
    expect(await f.db.owner('platform.webhook_deliveries').where({ endpoint_id: id })).to.have.length(1)
    for (const [method, path] of [
      ['DELETE', `${BASE}/00000000-0000-4000-8000-000000000000`],
      ['GET', `${BASE}/00000000-0000-4000-8000-000000000000/deliveries`],
      ['POST', `${BASE}/not-a-uuid/secret`],
      ['POST', `${BASE}/${id}/secret`],
    ] as const) {
      const answer = await f.stack.call(method, path, undefined, await elevated())
      expect([answer.status, answer.body?.code], path).to.deep.equal([404, 'webhook_endpoint_not_found'])
    }
  })
})
