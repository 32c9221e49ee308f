import { randomBytes, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { Webhook } from 'standardwebhooks'
import { QUEUES } from '../src/outbox/constants.ts'
import { DeliveryFailureError } from '../src/providers/provider.ts'
import { courierKit } from './support/courier-kit.ts'
import { outboxHarness, type OutboxHarness } from './support/outbox-harness.ts'
import { deliverOne } from './support/run-once.ts'
import { registerChannelsAsWorker } from './support/channels.ts'
import { createVerifiedIdentity, uniquePhone } from './support/helpers.ts'
import { scriptedProvider } from './support/scripted-provider.ts'
import { useWebStack } from './support/web-stack.ts'

const twilio = () => scriptedProvider((call) => ({ providerMessageId: `SM${call}` }), { id: 'twilio', channel: 'sms' })
const code = (destination: string, channel: string) => ({
  purpose: 'verification_code',
  channel,
  destination,
  secret: { code: '123456' },
  expiresAt: new Date(Date.now() + 600_000).toISOString(),
})

/** A Supabase Send SMS hook call for `phone`, signed as Supabase signs it (supabase/auth hookshttp.go, standardwebhooks). */
function postSupabaseSms(f: ReturnType<typeof useWebStack>, key: Buffer, phone: string) {
  const text = JSON.stringify({ user: { id: randomUUID(), phone: phone.slice(1) }, sms: { otp: '736201' } })
  const id = randomUUID()
  const at = new Date()
  const signature = new Webhook(key, { format: 'raw' }).sign(id, at, text)
  const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature }
  return f.stack.call('POST', '/hooks/supabase/send-sms', text, headers)
}

/** A web stack with the deployment's PHONE_CHANNELS, a worker harness on its database, and each test's own jobs only. */
function routingStack(phoneChannels: ('whatsapp' | 'sms')[], supabaseKey = randomBytes(32)) {
  const f = useWebStack({
    worker: false,
    sms: true,
    phoneChannels,
    webhooks: { SUPABASE_HOOK_SECRET: `v1,whsec_${supabaseKey.toString('base64')}` },
  })
  const context = { f, kit: courierKit(f), now: new Date(), harness: undefined as unknown as OutboxHarness, supabaseKey }
  beforeEach(async () => {
    context.now = new Date()
    context.harness = await outboxHarness(f.db, { keys: f.keys, clock: () => context.now, logger: f.logs.logger })
    // One database for the file: each test fetches only the jobs of its own messages.
    await f.db.owner('pgboss.job').where({ name: QUEUES.delivery }).del()
    // The fleet as the stack started it: email, WhatsApp and SMS.
    await registerChannelsAsWorker(f.db.owner, ['email', 'whatsapp', 'sms'])
    await f.stack.web.channels.refresh()
  })
  afterEach(async () => await context.harness.close())
  const messagesTo = (destination: string) =>
    f.db.owner('outbox.security_outbox_messages').where({ destination }).select('id', 'channel', 'carriers', 'state')
  return { context, messagesTo }
}

/**
 * Attacks on phone routing (docs/delivery.md "Phone channels"): PHONE_CHANNELS is the deployment's
 * allow-list and a key's channels are its owner's; neither the fleet's registrations changing nor a
 * failing provider may carry a code over a channel outside them.
 */
describe('attacks on phone routing with PHONE_CHANNELS=whatsapp,sms', () => {
  // The deployment lists both phone channels, WhatsApp first: only a key's scope stands between its code and SMS.
  const { context, messagesTo } = routingStack(['whatsapp', 'sms'])
  const whatsappDown = () =>
    scriptedProvider(() => new DeliveryFailureError('UNAVAILABLE', 'http_503'), { id: 'wasender', channel: 'whatsapp' })
  const noWhatsApp = () =>
    scriptedProvider(() => new DeliveryFailureError('REJECTED', '131026', null, true, 'channel_unreachable'), {
      id: 'whatsapp_cloud',
      channel: 'whatsapp',
    })

  /** A WhatsApp code sent with a key scoped to WhatsApp alone, on a deployment whose worker may also send SMS. */
  const scopedSend = async () => {
    const { key } = await context.kit.apiKey({ purposes: ['verification_code'], channels: ['whatsapp'] })
    const to = uniquePhone()
    const answer = await context.kit.send(key, code(to, 'whatsapp'))
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202)
    return String(answer.body!.messageId)
  }
  const workerDeps = (whatsapp: ReturnType<typeof scriptedProvider>, sms: ReturnType<typeof twilio>) => ({
    ...context.harness.deps({ whatsapp, sms }),
    phoneChannels: ['whatsapp' as const, 'sms' as const],
  })

  it('a courier key scoped to WhatsApp never sends SMS through the failover after a transient WhatsApp failure', async () => {
    const id = await scopedSend()
    expect(await context.f.db.owner('outbox.security_outbox_messages').where({ id }).first()).to.deep.include({ carriers: ['whatsapp'] })
    const [whatsapp, sms] = [whatsappDown(), twilio()]
    await deliverOne(workerDeps(whatsapp, sms), await context.harness.nextJob())
    await deliverOne(workerDeps(whatsapp, sms), (await context.harness.nextDueJob(context))!)
    expect(sms.calls, 'the key may not send SMS').to.have.length(0)
    expect(whatsapp.calls).to.have.length(2)
  })

  it('a courier key scoped to WhatsApp never sends SMS to a number without WhatsApp: its code is the dead letter it would be with WhatsApp alone', async () => {
    const id = await scopedSend()
    const [whatsapp, sms] = [noWhatsApp(), twilio()]
    await deliverOne(workerDeps(whatsapp, sms), await context.harness.nextJob())
    // Today's code would go on at once to the next phone channel: whatever attempt comes next.
    const next = await context.harness.nextDueJob(context)
    if (next) await deliverOne(workerDeps(whatsapp, sms), next)
    expect(sms.calls, 'the key may not send SMS').to.have.length(0)
    expect(await context.f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: id }).first()).to.include({
      reason: 'provider_rejected',
    })
  })

  it("a Supabase SMS hook's code follows PHONE_CHANNELS' order (WhatsApp first here), not SMS whatever the setting says", async () => {
    const phone = uniquePhone()
    expect((await postSupabaseSms(context.f, context.supabaseKey, phone)).status).to.equal(200)
    expect((await messagesTo(phone)).map((row) => row.channel)).to.deep.equal(['whatsapp'])
  })
})

describe('attacks on phone routing: PHONE_CHANNELS=sms is an allow-list for the web, the courier and the hooks', () => {
  const { context, messagesTo } = routingStack(['sms'])
  const { f, kit, supabaseKey } = context

  it('the web never enqueues a code on a channel PHONE_CHANNELS does not list, while the fleet registers only that one', async () => {
    // PHONE_CHANNELS=sms, and the registrations still show the old workers, which had WhatsApp only.
    await f.db.owner('outbox.delivery_channel_registrations').del()
    await registerChannelsAsWorker(f.db.owner, ['email', 'whatsapp'])
    await f.stack.web.channels.refresh()
    const phone = uniquePhone()
    const answer = await f.stack.call('POST', '/sign-ups', { identifier: phone, password: 'correct horse battery staple' })
    expect([answer.status, answer.body?.code]).to.deep.equal([422, 'channel_unavailable'])
    expect(await messagesTo(phone), 'nothing enqueued, on WhatsApp least of all').to.deep.equal([])
    await createVerifiedIdentity(f.db.owner, phone)
    const recovery = await f.stack.call('POST', '/password-recoveries', { identifier: phone })
    expect(recovery.status, 'the same answer for a number with an account').to.equal(422)
    expect(await messagesTo(phone)).to.deep.equal([])
  })

  it('the courier API refuses a channel PHONE_CHANNELS does not list, even to a key scoped to it', async () => {
    const { key } = await kit.apiKey({ purposes: ['verification_code'], channels: ['whatsapp', 'sms'] })
    const to = uniquePhone()
    const refused = await kit.send(key, code(to, 'whatsapp'))
    expect([refused.status, refused.body?.code]).to.deep.equal([422, 'channel_unavailable'])
    expect(await messagesTo(to)).to.deep.equal([])
    expect((await kit.send(key, code(to, 'sms'))).status, 'its listed channel').to.equal(202)
  })

  it("a Supabase SMS hook's code goes on PHONE_CHANNELS' channel, and is refused when the fleet has none of them", async () => {
    const post = (phone: string) => postSupabaseSms(f, supabaseKey, phone)
    const listed = uniquePhone()
    expect((await post(listed)).status).to.equal(200)
    expect((await messagesTo(listed)).map((row) => row.channel)).to.deep.equal(['sms'])

    await f.db.owner('outbox.delivery_channel_registrations').del()
    await registerChannelsAsWorker(f.db.owner, ['email', 'whatsapp'])
    await f.stack.web.channels.refresh()
    const unlisted = uniquePhone()
    const refused = await post(unlisted)
    expect(refused.status, 'Supabase reads a refusal from a 200 body').to.equal(200)
    expect(refused.body).to.deep.include({ code: 'channel_unavailable' })
    expect(await messagesTo(unlisted), 'never on WhatsApp').to.deep.equal([])
  })

  it('the worker never carries a code over an unlisted channel, even one enqueued on it before PHONE_CHANNELS changed', async () => {
    // Enqueued on WhatsApp (the harness's web has no PHONE_CHANNELS); the worker's deployment now lists SMS alone.
    const { messageId } = await context.harness.enqueue(uniquePhone())
    expect((await f.db.owner('outbox.security_outbox_messages').where({ id: messageId }).first()).channel).to.equal('whatsapp')
    const whatsapp = scriptedProvider((call) => ({ providerMessageId: `wa-${call}` }), { id: 'wasender', channel: 'whatsapp' })
    const sms = twilio()
    await deliverOne({ ...context.harness.deps({ whatsapp, sms }), phoneChannels: ['sms'] }, await context.harness.nextJob())
    expect(whatsapp.calls, 'never on WhatsApp').to.have.length(0)
    expect(sms.calls).to.have.length(1)
    expect((await f.db.owner('outbox.security_outbox_attempts').where({ message_id: messageId })).map((row) => row.channel)).to.deep.equal([
      'sms',
    ])
  })
})
