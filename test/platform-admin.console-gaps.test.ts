import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { createKnex } from '../src/db/knex.ts'
import { hashToken } from '../src/identity/secrets.ts'
import { destinationHmac } from '../src/outbox/destination.ts'
import { messagesToDestination } from '../src/platform/message-search.ts'
import { insertFailedDeadLetter } from './support/dead-letters.ts'
import { insertOpenMessage, uniqueEmail } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/security-outbox'

type SearchPage = {
  items: {
    messageId: string
    maskedDestination: string
    state: string
    attemptCount: number
    lastFailureClass: string | null
    deadLetterReason: string | null
    providers: string[]
  }[]
  pageInfo: { hasNextPage: boolean; endCursor: string | null }
}

describe('staff console: find the messages sent to a destination', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  it('finds every message to one exact address through the suppression hash, newest first, masked and paged; not a +tag variant, not a row without the hash', async () => {
    const staff = await kit.staffMember()
    const alice = uniqueEmail('alice')
    const [local, domain] = alice.split('@') as [string, string]
    const hmac = (address: string) => destinationHmac(f.keys.codeHashKey, 'email', address)
    // One message through the real sign-up (the web writes the hash on enqueue), two more as rows.
    expect((await f.stack.call('POST', '/sign-ups', { identifier: alice, password: 'correct horse battery' })).status).to.equal(202)
    const signUp = (await f.db.owner('outbox.security_outbox_messages').where({ destination: alice }).first()).id as string
    const { messageId: failed } = await insertFailedDeadLetter(f.db.owner, {
      destination: alice,
      identifier: uniqueEmail('owner'),
      destinationHmac: hmac(alice),
      failures: ['UNAVAILABLE', 'THROTTLED'],
      providers: ['ses', 'smtp'],
    })
    const newest = await insertOpenMessage(f.db.owner, { destination: alice, destination_hmac: hmac(alice) })
    // Not hers: a variant of her address is another destination; a row without a hash is not read.
    await insertOpenMessage(f.db.owner, { destination: `${local}+x@${domain}`, destination_hmac: hmac(`${local}+x@${domain}`) })
    await insertOpenMessage(f.db.owner, { destination: alice, destination_hmac: null })

    const search = async (body: Record<string, unknown>) => {
      const answer = await f.stack.call('POST', `${BASE}/message-searches`, body, staff.auth)
      return { status: answer.status, body: answer.body as unknown as SearchPage }
    }
    const first = await search({ destination: `  ${alice.toUpperCase()} `, limit: 2 })
    expect(first.status).to.equal(200)
    expect(first.body.items.map((item) => item.messageId)).to.deep.equal([newest, failed])
    expect(first.body.pageInfo.hasNextPage).to.equal(true)
    expect(first.body.items[1]).to.include({
      state: 'dead_lettered',
      attemptCount: 2,
      lastFailureClass: 'THROTTLED',
      deadLetterReason: 'retries_exhausted',
    })
    expect(first.body.items[1]!.providers).to.deep.equal(['ses', 'smtp'])
    const second = await search({ destination: alice, limit: 2, before: first.body.pageInfo.endCursor })
    expect(second.body.items.map((item) => item.messageId)).to.deep.equal([signUp])
    expect(second.body.pageInfo).to.deep.equal({ hasNextPage: false, endCursor: signUp })

    for (const item of [...first.body.items, ...second.body.items]) expect(item.maskedDestination).to.not.include(local)
    expect(JSON.stringify([first.body, second.body])).to.not.include(local)
    expect(f.logs.text()).to.not.include(local)
  })

  it('finds a message hashed under a retired code-hash key while CODE_HASH_KEYS still lists it, and not once it is dropped', async () => {
    const staff = await kit.staffMember()
    const bob = uniqueEmail('bob')
    const retired = randomBytes(32)
    const id = await insertOpenMessage(f.db.owner, { destination: bob, destination_hmac: destinationHmac(retired, 'email', bob) })
    const api = createKnex(f.db.apiUrl, { applicationName: 'console-gaps-api', max: 1 })
    try {
      const find = async (codeHashKeys: Buffer[]) =>
        (
          await messagesToDestination(
            api,
            { codeHashKey: codeHashKeys[0]!, codeHashKeys },
            { staff: { tokenHash: hashToken(staff.token) }, now: new Date(), destination: bob, limit: 10 },
          )
        ).items.map((item) => item.messageId)
      expect(await find([f.keys.codeHashKey, retired])).to.deep.equal([id])
      expect(await find([f.keys.codeHashKey])).to.deep.equal([])
    } finally {
      await api.destroy()
    }
  })

  it('answers 400 invalid_destination for what is no address, 422 for a malformed body, 403 to anyone not staff', async () => {
    const staff = await kit.staffMember()
    const person = await kit.account()
    const notAnAddress = await f.stack.call('POST', `${BASE}/message-searches`, { destination: 'alice' }, staff.auth)
    expect([notAnAddress.status, notAnAddress.body!.code]).to.deep.equal([400, 'invalid_destination'])
    const extra = await f.stack.call('POST', `${BASE}/message-searches`, { destination: person.email, limit: 500 }, staff.auth)
    expect([extra.status, extra.body!.code]).to.deep.equal([422, 'invalid_request'])
    const stranger = await f.stack.call('POST', `${BASE}/message-searches`, { destination: person.email }, person.auth)
    expect([stranger.status, stranger.body!.code]).to.deep.equal([403, 'not_staff'])
  })
})

describe('staff console: delivery-event counts', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  it('counts provider events per provider, channel and event over the window asked for', async () => {
    const staff = await kit.staffMember()
    const now = Date.now()
    const sent = async (provider: string) => {
      const id = await insertOpenMessage(f.db.owner, {
        state: 'leased',
        lease_job_id: uuidv7(),
        lease_retry_count: 0,
        leased_at: new Date(),
      })
      await f.db.owner.transaction(async (trx) => {
        await trx('outbox.security_outbox_attempts').insert({
          message_id: id,
          attempt_no: 1,
          provider,
          outcome: 'published',
          provider_message_id: uuidv7(),
          duration_ms: 3,
        })
        await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
        await trx('outbox.security_outbox_messages')
          .where({ id })
          .update({ state: 'published', published_at: new Date(), attempt_count: 1, lease_job_id: null, lease_retry_count: null })
      })
      return id
    }
    const ses = await sent('ses')
    const smtp = await sent('smtp')
    const event = (message_id: string, event: string, hoursAgo: number) => ({
      message_id,
      event,
      occurred_at: new Date(now - hoursAgo * 3_600_000),
      received_at: new Date(now - hoursAgo * 3_600_000),
    })
    await f.db
      .owner('outbox.security_outbox_delivery_events')
      .insert([event(ses, 'delivered', 1), event(ses, 'complained', 2), event(smtp, 'bounced', 3), event(smtp, 'delivered', 30)])

    const counts = async (query: string) =>
      (await f.stack.call('GET', `${BASE}/delivery-events${query}`, undefined, staff.auth)).body as { counts: unknown[] }
    expect((await counts('')).counts).to.deep.equal([
      { provider: 'ses', channel: 'email', event: 'complained', count: 1 },
      { provider: 'ses', channel: 'email', event: 'delivered', count: 1 },
      { provider: 'smtp', channel: 'email', event: 'bounced', count: 1 },
    ])
    expect((await counts('?hours=48')).counts).to.deep.include({ provider: 'smtp', channel: 'email', event: 'delivered', count: 1 })
    const wide = await f.stack.call('GET', `${BASE}/delivery-events?hours=100000`, undefined, staff.auth)
    expect([wide.status, wide.body!.code]).to.deep.equal([422, 'invalid_request'])
  })
})

describe('staff console: redrive the dead letters of one reason', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)
  const redrive = (headers: Record<string, string>, body: Record<string, unknown>) =>
    f.stack.call('POST', `${BASE}/dead-letters/redrives`, body, headers)

  it('reissues after a step-up those it can, skips and counts the rest by the single reissue’s refusal, audits, and a repeat with the key does nothing', async () => {
    const staff = await kit.staffMember()
    const lockedOut = [
      await kit.deadSignUp('worker_crash_loop'),
      await kit.deadSignUp('worker_crash_loop'),
      await kit.deadSignUp('worker_crash_loop'),
    ]
    const bounced = await kit.deadSignUp('worker_crash_loop')
    const bouncedRow = await f.db.owner('outbox.security_outbox_messages').where({ id: bounced.messageId }).first()
    await f.db.owner('outbox.suppressed_destinations').insert({
      id: uuidv7(),
      destination_hmac: bouncedRow.destination_hmac,
      channel: 'email',
      masked_destination: 'x',
      reason: 'permanent_bounce',
      since: new Date(),
    })
    const expired = await kit.deadSignUp('worker_crash_loop')
    await f.db
      .owner('identity.challenges')
      .where({ id: expired.challengeId })
      .update({ expires_at: new Date(Date.now() - 1_000) })
    const otherReason = await kit.deadSignUp('retries_exhausted')
    const messages = async () => Number((await f.db.owner('outbox.security_outbox_messages').count({ n: '*' }))[0]!.n)
    const before = await messages()

    const noStepUp = await redrive({ ...staff.auth, 'idempotency-key': uuidv7() }, { reason: 'worker_crash_loop' })
    expect([noStepUp.status, noStepUp.body!.code]).to.deep.equal([403, 'elevation_required'])
    const elevated = { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) }
    const noKey = await redrive(elevated, { reason: 'worker_crash_loop' })
    expect([noKey.status, noKey.body!.code]).to.deep.equal([400, 'idempotency_key_required'])
    const tooMany = await redrive({ ...elevated, 'idempotency-key': uuidv7() }, { reason: 'worker_crash_loop', limit: 51 })
    expect([tooMany.status, tooMany.body!.code]).to.deep.equal([422, 'invalid_request'])
    expect(await messages()).to.equal(before)

    const key = uuidv7()
    const done = await redrive({ ...elevated, 'idempotency-key': key }, { reason: 'worker_crash_loop' })
    expect(done.status).to.equal(200)
    expect(done.body).to.deep.include({ reason: 'worker_crash_loop', considered: 5, reissued: 3, hasMore: false })
    expect(done.body!.skipped).to.deep.equal({ destination_suppressed: 1, challenge_expired: 1 })
    expect(await messages()).to.equal(before + 3)
    for (const dead of lockedOut) {
      const fresh = await f.db.owner('outbox.security_outbox_messages').where({ destination: dead.email, state: 'pending' })
      expect(fresh, dead.email).to.have.length(1)
    }
    expect(await f.db.owner('outbox.security_outbox_messages').where({ destination: otherReason.email, state: 'pending' })).to.have.length(
      0,
    )
    const audit = await f.db.owner('platform.audit_records').where({ actor: staff.identityId }).orderBy('at')
    expect(audit.map((row) => row.action).sort()).to.deep.equal([
      'security_outbox.dead_letter_reissued',
      'security_outbox.dead_letter_reissued',
      'security_outbox.dead_letter_reissued',
      'security_outbox.dead_letters_redriven',
    ])
    expect(JSON.stringify(audit)).to.not.include(lockedOut[0]!.email)

    const replay = await redrive({ ...elevated, 'idempotency-key': key }, { reason: 'worker_crash_loop' })
    expect(replay.headers.get('idempotent-replayed')).to.equal('true')
    expect(replay.body).to.deep.equal(done.body)
    const again = await redrive({ ...elevated, 'idempotency-key': uuidv7() }, { reason: 'worker_crash_loop' })
    expect(again.body).to.deep.include({ considered: 5, reissued: 0 })
    expect(await messages()).to.equal(before + 3)
  })

  it('takes at most `limit` dead letters a call and goes on after its endCursor', async () => {
    const staff = await kit.staffMember()
    // With the one the test above left: four dead letters of this reason.
    for (let i = 0; i < 3; i += 1) await kit.deadSignUp('retries_exhausted')
    const elevated = { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) }
    const first = await redrive({ ...elevated, 'idempotency-key': uuidv7() }, { reason: 'retries_exhausted', limit: 2 })
    expect(first.body).to.deep.include({ considered: 2, reissued: 2, hasMore: true })
    const rest = await redrive(
      { ...elevated, 'idempotency-key': uuidv7() },
      { reason: 'retries_exhausted', limit: 2, after: first.body!.endCursor },
    )
    expect(rest.body).to.deep.include({ considered: 2, reissued: 2, hasMore: false })
  })
})

describe('staff console: see and lift a pause or an outage hold', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  /** A sign-up whose message the hold or pause put back: its job starts in five minutes. */
  async function heldMessage() {
    const email = uniqueEmail('held')
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password: 'correct horse battery' })).status).to.equal(202)
    const message = await f.db.owner('outbox.security_outbox_messages').where({ destination: email }).first()
    const later = new Date(Date.now() + 300_000)
    await f.db.owner('outbox.security_outbox_messages').where({ id: message.id }).update({ available_at: later })
    await f.db.owner('pgboss.job').where({ id: message.job_id }).update({ start_after: later })
    return message as { id: string; job_id: string }
  }
  const startsNow = async (message: { id: string; job_id: string }) =>
    (await f.db.owner('pgboss.job').where({ id: message.job_id }).first()).start_after.getTime() <= Date.now()

  it("shows a channel's running pauses, its providers' and a whole channel's, and lifts them after a step-up: audited, its held messages go out now", async () => {
    const staff = await kit.staffMember()
    const until = new Date(Date.now() + 300_000)
    // A relay's own pause, and a whole channel's as a worker of the previous release writes it.
    await f.db.owner('outbox.paused_providers').insert({ provider: 'smtp', channel: 'email', paused_until: until, throttle_streak: 2 })
    await f.db.owner('outbox.provider_pauses').insert({ channel: 'email', paused_until: until, throttle_streak: 3, updated_at: new Date() })
    const held = await heldMessage()

    const pauses = await f.stack.call('GET', `${BASE}/pauses`, undefined, staff.auth)
    expect(pauses.body).to.deep.equal({
      items: [
        { channel: 'email', provider: null, pausedUntil: until.toISOString(), throttleStreak: 3 },
        { channel: 'email', provider: 'smtp', pausedUntil: until.toISOString(), throttleStreak: 2 },
      ],
    })
    const noStepUp = await f.stack.call('DELETE', `${BASE}/channels/email/pause`, undefined, staff.auth)
    expect([noStepUp.status, noStepUp.body!.code]).to.deep.equal([403, 'elevation_required'])
    expect(await startsNow(held)).to.equal(false)

    const elevated = { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) }
    const lifted = await f.stack.call('DELETE', `${BASE}/channels/email/pause`, undefined, elevated)
    expect([lifted.status, lifted.body]).to.deep.equal([200, { released: 1 }])
    expect(await startsNow(held)).to.equal(true)
    expect((await f.stack.call('GET', `${BASE}/pauses`, undefined, staff.auth)).body).to.deep.equal({ items: [] })
    const audit = await f.db
      .owner('platform.audit_records')
      .where({ actor: staff.identityId, action: 'security_outbox.channel_pause_lifted' })
    expect(audit.map((row) => [row.subject, row.details.throttleStreak, row.details.released, row.details.providers])).to.deep.equal([
      ['email', 3, 1, ['smtp']],
    ])

    const again = await f.stack.call('DELETE', `${BASE}/channels/email/pause`, undefined, elevated)
    expect([again.status, again.body!.code]).to.deep.equal([404, 'pause_not_found'])
    const unknown = await f.stack.call('DELETE', `${BASE}/channels/pigeon/pause`, undefined, elevated)
    expect([unknown.status, unknown.body!.code]).to.deep.equal([404, 'pause_not_found'])
  })

  it('lifts an outage hold after a step-up as its first good probe would: the provider up, audited, its channel’s held messages out now', async () => {
    const staff = await kit.staffMember()
    const since = new Date(Date.now() - 60_000)
    await f.db.owner('outbox.provider_states').insert({
      provider: 'ses',
      channel: 'email',
      state: 'down',
      failure_streak: 9,
      last_failure_at: since,
      down_since: since,
      probe_interval_ms: 10_000,
      next_probe_at: new Date(Date.now() + 10_000),
      updated_at: since,
    })
    const held = await heldMessage()
    const elevated = { ...staff.auth, 'x-elevation-token': await kit.elevate(staff) }
    const lifted = await f.stack.call('DELETE', `${BASE}/providers/ses/hold`, undefined, elevated)
    expect([lifted.status, lifted.body]).to.deep.equal([200, { released: 1 }])
    expect(await startsNow(held)).to.equal(true)
    const row = await f.db.owner('outbox.provider_states').where({ provider: 'ses' }).first()
    expect(row).to.include({
      state: 'up',
      failure_streak: 0,
      down_since: null,
      probe_interval_ms: null,
      next_probe_at: null,
      probe_until: null,
    })
    const backlog = await f.stack.call('GET', `${BASE}/backlog`, undefined, staff.auth)
    expect((backlog.body as { providers: { state: string }[] }).providers.map((p) => p.state)).to.deep.equal(['up'])
    const audit = await f.db
      .owner('platform.audit_records')
      .where({ actor: staff.identityId, action: 'security_outbox.provider_hold_lifted' })
    expect(audit.map((entry) => [entry.subject, entry.details.failureStreak, entry.details.released])).to.deep.equal([['ses', 9, 1]])

    const again = await f.stack.call('DELETE', `${BASE}/providers/ses/hold`, undefined, elevated)
    expect([again.status, again.body!.code]).to.deep.equal([404, 'hold_not_found'])
    const person = await kit.account()
    const stranger = await f.stack.call('DELETE', `${BASE}/providers/ses/hold`, undefined, person.auth)
    expect([stranger.status, stranger.body!.code]).to.deep.equal([403, 'not_staff'])
  })
})
