import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import type { DeliveryDeps } from '../jobs/delivery-deps.ts'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { QUEUES, type DeliveryJobData } from '../src/outbox/constants.ts'
import { sendCapsFrom } from '../src/outbox/send-caps.ts'
import { createSessionTx } from '../src/identity/sessions.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { deliverBatch } from './support/run-once.ts'
import { scriptedProvider } from './support/scripted-provider.ts'
import { useWebStack } from './support/web-stack.ts'

/** The start of a clock hour a little ahead of the database's: each test counts in hours of its own. */
const hourStart = (offsetHours: number) => new Date((Math.floor(Date.now() / 3_600_000) + offsetHours) * 3_600_000)
const PASSWORD = 'a stranger with numbers of their own'

/**
 * Review of the owner/stranger classes of the send caps (docs/security.md "Caps from the owner's side"),
 * from outside: the real web on a clock the test moves, SMS its only phone channel, and the worker's
 * own pipeline one batch at a time (`runOnce`). The attacker is a stranger who owns a few numbers in
 * the victim's prefix (rented VoIP numbers in one exchange cost a dollar a month) and receives their
 * codes.
 */
describe('review: attacks on the owner and stranger classes of the send caps', () => {
  let now = new Date()
  const f = useWebStack({ worker: false, whatsapp: false, sms: true, clock: () => now })
  let worker: Knex
  let boss: PgBoss
  before(async () => {
    worker = createKnex(f.db.workerUrl, { applicationName: 'test-worker' })
    boss = createBoss(f.db.workerUrl, 'web', f.logs.logger)
    await boss.start()
  })
  after(async () => {
    await boss?.stop({ graceful: false })
    await worker?.destroy()
  })

  const twilio = scriptedProvider((call) => ({ providerMessageId: `SM${call}` }), { id: 'twilio', channel: 'sms' })
  const mail = scriptedProvider((call) => ({ providerMessageId: `ses-${call}` }))
  const deps = (caps: Parameters<typeof sendCapsFrom>[0]): DeliveryDeps => ({
    db: worker,
    boss,
    outboxKey: f.keys.outboxKey,
    providers: { sms: [twilio], email: [mail] },
    clock: () => now,
    logger: f.logs.logger,
    settings: { maxAttempts: 5, retrySchedule: [5_000, 30_000, 120_000, 600_000, 1_800_000], sendTimeoutMs: 2_000 },
    invitationLinkBaseUrl: 'https://app.sealpost.test',
    sendCaps: sendCapsFrom(caps),
    phoneChannels: ['sms'],
  })
  /** One worker pass over every job there is (held ones come round again and are held again). */
  const deliver = async (caps: Parameters<typeof sendCapsFrom>[0]) => {
    const jobs = await boss.fetch<DeliveryJobData>(QUEUES.delivery, { batchSize: 500, ignoreStartAfter: true })
    await deliverBatch(deps(caps), jobs)
  }
  const sentTo = (number: string) => twilio.calls.filter((call) => call.destination === number)
  const codeSentTo = (number: string) => /\b(\d{6})\b/.exec(sentTo(number).at(-1)!.text)![1]!
  const post = async (path: string, body: unknown) => (await f.stack.call('POST', path, body)).status

  it("a stranger who verifies four numbers of their own in the victim's prefix and asks recoveries to them cannot hold the victim's own recovery code", async () => {
    const caps = { SMS_PREFIX_HOURLY_CAP: 20 }
    now = new Date(hourStart(1).getTime() + 60_000)
    // The attacker's own numbers become "owners": signed up and confirmed with the codes they receive.
    const own = Array.from({ length: 4 }, (_, i) => `+4915121${String(500_000 + i)}`)
    for (const number of own) {
      expect(await post('/sign-ups', { identifier: number, password: PASSWORD })).to.equal(202)
      await deliver(caps)
      expect(await post('/sign-ups/confirmation', { identifier: number, code: codeSentTo(number), password: PASSWORD })).to.equal(201)
    }
    const alice = `+4915121${String(900_001)}`
    await createVerifiedIdentity(f.db.owner, alice)

    // The next hour: five recoveries to each of the attacker's numbers (a resend every 31 s, within
    // one network's slice of each destination's budget), each delivered as it comes.
    now = new Date(hourStart(2).getTime() + 60_000)
    for (let round = 0; round < 5; round++) {
      for (const number of own) expect(await post('/password-recoveries', { identifier: number })).to.equal(202)
      await deliver(caps)
      now = new Date(now.getTime() + 31_000)
    }
    expect(own.flatMap(sentTo).filter((call) => call.purpose === 'password_recovery')).to.have.length(20)

    // Alice, who owns her number, asks for her recovery code the same hour.
    expect(await post('/password-recoveries', { identifier: alice })).to.equal(202)
    await deliver(caps)
    expect(
      sentTo(alice).map((call) => call.purpose),
      "alice's own recovery code goes out now",
    ).to.deep.equal(['password_recovery'])
  })

  /**
   * What the stranger sees after asking a sign-up for `target`: whether a code to a number of their
   * own in the same prefix, asked right after, arrives this hour. The stranger first spends all but
   * one slot of the prefix's hourly cap on sign-ups to two numbers nobody owns.
   */
  async function ownCodeArrivesAfterSignUpFor(offsetHours: number, block: string, target: string): Promise<boolean> {
    const caps = { SMS_PREFIX_HOURLY_CAP: 3 }
    now = new Date(hourStart(offsetHours).getTime() + 60_000)
    for (const filler of [`+49151${block}100001`, `+49151${block}100002`])
      expect(await post('/sign-ups', { identifier: filler, password: PASSWORD })).to.equal(202)
    await deliver(caps)
    expect(await post('/sign-ups', { identifier: target, password: PASSWORD }), 'the same 202 either way').to.equal(202)
    await deliver(caps)
    const mine = `+49151${block}555555`
    expect(await post('/sign-ups', { identifier: mine, password: PASSWORD })).to.equal(202)
    await deliver(caps)
    return sentTo(mine).length > 0
  }

  it('a stranger with a number of their own in a prefix cannot tell from when its code arrives whether a sign-up they asked for another number of it met an account', async () => {
    const withAccount = '+4915131900001'
    await createVerifiedIdentity(f.db.owner, withAccount)
    const afterAccount = await ownCodeArrivesAfterSignUpFor(3, '31', withAccount)
    const afterNobody = await ownCodeArrivesAfterSignUpFor(4, '32', '+4915132900001')
    expect(afterAccount, 'what the stranger sees is the same whether or not the number has an account').to.equal(afterNobody)
  })

  /**
   * The same through the owners' counter: the stranger's own number is verified (an account of
   * theirs), two recoveries to it spend all but one owners' slot of the prefix, then a recovery
   * for `target`, then a third to their own number: does it arrive this hour?
   */
  async function ownCodeArrivesAfterRecoveryFor(offsetHours: number, block: string, target: string): Promise<boolean> {
    const caps = { SMS_PREFIX_HOURLY_CAP: 3 }
    const mine = `+49151${block}555555`
    await createVerifiedIdentity(f.db.owner, mine)
    now = new Date(hourStart(offsetHours).getTime() + 60_000)
    for (let i = 0; i < 2; i++) {
      expect(await post('/password-recoveries', { identifier: mine })).to.equal(202)
      await deliver(caps)
      now = new Date(now.getTime() + 31_000)
    }
    expect(await post('/password-recoveries', { identifier: target }), 'the same 202 either way').to.equal(202)
    await deliver(caps)
    const before = sentTo(mine).length
    expect(await post('/password-recoveries', { identifier: mine })).to.equal(202)
    await deliver(caps)
    return sentTo(mine).length > before
  }

  it('a stranger with an account on a number in a prefix cannot tell from when its codes arrive whether a recovery they asked for another number of it met an account', async () => {
    const withAccount = '+4915133900001'
    await createVerifiedIdentity(f.db.owner, withAccount)
    const afterAccount = await ownCodeArrivesAfterRecoveryFor(5, '33', withAccount)
    const afterNobody = await ownCodeArrivesAfterRecoveryFor(6, '34', '+4915134900001')
    expect(afterAccount, 'what the stranger sees is the same whether or not the number has an account').to.equal(afterNobody)
  })

  it("a stranger's own organization invites a real owner's address and fills the owners' email counter: the owner's recovery email is not held", async () => {
    const caps = { SEND_CAP_PER_HOUR: { email: 3 } }
    now = new Date(hourStart(7).getTime() + 60_000)
    const victim = uniqueEmail('victim')
    await createVerifiedIdentity(f.db.owner, victim)
    // Any stranger with an account of their own makes an organization and invites whom they like.
    const { identityId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('stranger'))
    const { token } = await f.db.owner.transaction((trx) => createSessionTx(trx, identityId, now))
    const auth = f.stack.bearer(token)
    const organization = await f.stack.call('POST', '/organizations', { name: 'Totally Real Co' }, auth)
    expect(organization.status).to.equal(201)
    for (let i = 0; i < 3; i++) {
      const invited = await f.stack.call('POST', `/organizations/${String(organization.body!.id)}/invitations`, { email: victim }, auth)
      expect(invited.status).to.equal(202)
      await deliver(caps)
    }
    const invitations = mail.calls.filter((call) => call.destination === victim && call.purpose === 'invitation')
    expect(invitations, "the stranger's three invitations went out, on the owners' counter").to.have.length(3)
    expect(await post('/password-recoveries', { identifier: victim })).to.equal(202)
    await deliver(caps)
    const recoveries = mail.calls.filter((call) => call.destination === victim && call.purpose === 'password_recovery')
    expect(recoveries, "the owner's own recovery code goes out now").to.have.length(1)
  })
})
