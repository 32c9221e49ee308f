import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import { parseIdentifier } from '../src/identity/identifiers.ts'
import { changeStaff } from '../src/platform/staff.ts'
import { eventually, inbox, insertOpenMessage } from './support/helpers.ts'
import { staffKit } from './support/staff-kit.ts'
import { useWebStack } from './support/web-stack.ts'

const BASE = '/platform-admin/security-outbox'
const password = 'correct horse battery'

describe('staff: backlog and dead letters', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  it('answers the backlog with exact counts per state, the oldest due age and the queue', async () => {
    const staff = await kit.staffMember()
    const before = (await f.stack.call('GET', `${BASE}/backlog`, undefined, staff.auth)).body as { states: Record<string, number> }
    const now = Date.now()
    await insertOpenMessage(f.db.owner, { available_at: new Date(now - 120_000) })
    await insertOpenMessage(f.db.owner, { available_at: new Date(now + 600_000) })
    await insertOpenMessage(f.db.owner, { state: 'leased', lease_job_id: uuidv7(), lease_retry_count: 0, leased_at: new Date() })
    for (const [reason, at] of [
      ['provider_rejected', now - 3_600_000],
      ['retries_exhausted', now - 60_000],
      ['retries_exhausted', now - 25 * 3_600_000],
    ] as const) {
      await kit.deadLetter(await insertOpenMessage(f.db.owner), reason, new Date(at))
    }

    const answer = await f.stack.call('GET', `${BASE}/backlog`, undefined, staff.auth)
    expect(answer.status).to.equal(200)
    const body = answer.body as {
      states: Record<string, number>
      oldestDuePendingAgeSeconds: number
      deadLettersLast24h: Record<string, number>
      queue: Record<string, number>
    }
    expect(body.states).to.deep.equal({
      pending: before.states.pending! + 2,
      leased: before.states.leased! + 1,
      published: before.states.published!,
      dead_lettered: before.states.dead_lettered! + 3,
    })
    expect(body.oldestDuePendingAgeSeconds).to.be.within(119, 122)
    expect(body.deadLettersLast24h).to.include({ provider_rejected: 1, retries_exhausted: 1, worker_crash_loop: 0, invitation_revoked: 0 })
    const [jobs] = await f.db
      .owner('pgboss.job')
      .where({ name: 'security-outbox' })
      .whereIn('state', ['created', 'retry'])
      .count({ n: '*' })
    expect(body.queue).to.deep.equal({ queued: Number(jobs!.n), deferred: 0, active: 0, failed: 0 })
  })

  it("lists each provider's breaker and pause in the backlog: held down since when, its next probe, paused until when", async () => {
    const staff = await kit.staffMember()
    const since = new Date(Date.now() - 30_000)
    const nextProbe = new Date(Date.now() + 10_000)
    await f.db.owner('outbox.paused_providers').insert({ provider: 'ses', channel: 'email', paused_until: nextProbe })
    await f.db.owner('outbox.provider_states').insert([
      { provider: 'ses', channel: 'email', updated_at: since },
      {
        provider: 'wasender',
        channel: 'whatsapp',
        state: 'down',
        failure_streak: 7,
        down_since: since,
        probe_interval_ms: 10_000,
        next_probe_at: nextProbe,
        updated_at: since,
      },
    ])
    const answer = await f.stack.call('GET', `${BASE}/backlog`, undefined, staff.auth)
    expect((answer.body as { providers: unknown[] }).providers).to.deep.equal([
      {
        provider: 'ses',
        channel: 'email',
        state: 'up',
        failureStreak: 0,
        downSince: null,
        nextProbeAt: null,
        pausedUntil: nextProbe.toISOString(),
      },
      {
        provider: 'wasender',
        channel: 'whatsapp',
        state: 'down',
        failureStreak: 7,
        downSince: since.toISOString(),
        nextProbeAt: nextProbe.toISOString(),
        pausedUntil: null,
      },
    ])
  })

  it('pages 250 dead letters by 50 forward and back, each exactly once, newest first, destinations masked', async () => {
    const staff = await kit.staffMember()
    const owner: Knex = f.db.owner
    // Bulk rows, two per timestamp so the id breaks ties; half emails, half phones.
    const base = Date.now() - 3_600_000
    const { identityId, loginIdentifierId } = (await owner('identity.login_identifiers').first(
      'identity_id as identityId',
      'id as loginIdentifierId',
    ))!
    const challengeId = uuidv7()
    await owner('identity.challenges').insert({
      id: challengeId,
      purpose: 'password_recovery',
      identity_id: identityId,
      login_identifier_id: loginIdentifierId,
      code_hash: randomBytes(32),
      expires_at: new Date(Date.now() + 600_000),
    })
    const rows = Array.from({ length: 250 }, (_, i) => ({
      id: uuidv7(),
      at: new Date(base + Math.floor(i / 2) * 1000),
      destination: i % 2 ? `alice.smith${i}@example.com` : `+5491155${String(i).padStart(6, '0')}`,
    }))
    await owner.batchInsert(
      'outbox.security_outbox_messages',
      rows.map((row) => ({
        id: row.id,
        purpose: 'password_recovery',
        challenge_id: challengeId,
        channel: row.destination.startsWith('+') ? 'whatsapp' : 'email',
        destination: row.destination,
        state: 'dead_lettered',
        dead_lettered_at: row.at,
        expires_at: new Date(Date.now() + 600_000),
      })),
      100,
    )
    await owner.batchInsert(
      'outbox.security_outbox_dead_letters',
      rows.map((row) => ({ message_id: row.id, reason: 'retries_exhausted', last_failure_class: 'UNAVAILABLE', dead_lettered_at: row.at })),
      100,
    )
    // Every dead letter of this database (earlier tests left some), in the order the pages promise.
    const expected = (
      await owner('outbox.security_outbox_dead_letters')
        .orderBy([
          { column: 'dead_lettered_at', order: 'desc' },
          { column: 'message_id', order: 'desc' },
        ])
        .select('message_id')
    ).map((row) => row.message_id as string)
    expect(expected.length).to.be.at.least(250)
    const pages = Math.ceil(expected.length / 50)

    type Page = {
      items: { messageId: string; maskedDestination: string }[]
      pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string; endCursor: string }
    }
    const get = async (query: string) => (await f.stack.call('GET', `${BASE}/dead-letters?${query}`, undefined, staff.auth)).body as Page
    const forward: Page[] = [await get('limit=50')]
    while (forward.at(-1)!.pageInfo.hasNextPage) forward.push(await get(`limit=50&after=${forward.at(-1)!.pageInfo.endCursor}`))
    expect(forward).to.have.length(pages)
    expect(forward[0]!.pageInfo.hasPreviousPage).to.equal(false)
    expect(forward.flatMap((page) => page.items.map((item) => item.messageId))).to.deep.equal(expected)

    const backward: Page[] = [forward.at(-1)!]
    while (backward.at(-1)!.pageInfo.hasPreviousPage) backward.push(await get(`limit=50&before=${backward.at(-1)!.pageInfo.startCursor}`))
    expect(backward).to.have.length(pages)
    expect(backward.reverse().flatMap((page) => page.items.map((item) => item.messageId))).to.deep.equal(expected)

    for (const item of forward.flatMap((page) => page.items)) {
      const row = rows.find((entry) => entry.id === item.messageId)
      if (!row) continue
      if (row.destination.startsWith('+')) {
        expect(item.maskedDestination)
          .to.match(/^\+54•+\d{4}$/)
          .and.not.to.include(row.destination.slice(3, -4))
      } else {
        const local = row.destination.split('@')[0]!
        expect(item.maskedDestination)
          .to.match(/^a•••\d@e•••\.com$/)
          .and.not.to.include(local)
      }
    }
    expect(JSON.stringify(forward)).not.to.match(/alice\.smith|\+5491155/)
    const bad = await f.stack.call('GET', `${BASE}/dead-letters?after=nonsense`, undefined, staff.auth)
    expect(bad.status).to.equal(400)
  })
})

describe('staff: refusals come before any outbox row is read', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  it('refuses non-staff, revoked staff and a reissue without elevation while the outbox functions are booby-trapped', async () => {
    const stranger = await kit.account()
    const formerStaff = await kit.staffMember()
    expect(await changeStaff(f.db.owner, 'revoke', parseIdentifier(formerStaff.email)!, 'test', new Date())).to.equal('revoked')
    const staff = await kit.staffMember()
    // Any read of the outbox through these routes now fails loudly (500), so a 403 proves none happened.
    for (const fn of [
      'backlog_summary(p_session_token_hash bytea, p_now timestamptz)',
      'dead_letter_page(p_session_token_hash bytea, p_now timestamptz, p_limit integer, p_after_at timestamptz, p_after_id uuid, p_before_at timestamptz, p_before_id uuid)',
      'reissue_candidate(p_session_token_hash bytea, p_message_id uuid, p_now timestamptz)',
    ]) {
      const name = fn.slice(0, fn.indexOf('('))
      const returns = (await f.db.owner.raw(`SELECT pg_get_function_result('outbox.${fn.replace(/p_\w+ /g, '')}'::regprocedure) AS r`))
        .rows[0].r
      await f.db.owner.raw(
        `CREATE OR REPLACE FUNCTION outbox.${fn} RETURNS ${returns} LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN RAISE EXCEPTION 'outbox read by ${name}'; END $$`,
      )
    }
    const reissue = `${BASE}/dead-letters/${uuidv7()}/reissues`
    for (const who of [stranger, formerStaff]) {
      for (const [method, path] of [
        ['GET', `${BASE}/backlog`],
        ['GET', `${BASE}/dead-letters`],
        ['POST', reissue],
      ] as const) {
        const answer = await f.stack.call(method, path, undefined, {
          ...who.auth,
          'idempotency-key': 'k1',
          'x-elevation-token': 'x'.repeat(43),
        })
        expect(answer.status, `${method} ${path}`).to.equal(403)
        expect(answer.body).to.include({ code: 'not_staff' })
      }
    }
    expect((await f.stack.call('GET', `${BASE}/backlog`)).status, 'no bearer').to.equal(401)
    const unelevated = await f.stack.call('POST', reissue, undefined, { ...staff.auth, 'idempotency-key': 'k2' })
    expect(unelevated.status).to.equal(403)
    expect(unelevated.body).to.include({ code: 'elevation_required' })
    // The trap is live: staff reach the functions and fail on them.
    expect((await f.stack.rawCall('GET', `${BASE}/backlog`, undefined, staff.auth)).status).to.equal(500)
    expect(
      (
        await f.stack.rawCall('POST', reissue, undefined, {
          ...staff.auth,
          'idempotency-key': 'k3',
          'x-elevation-token': await kit.elevate(staff),
        })
      ).status,
    ).to.equal(500)
  })
})

describe('staff: reissue of a dead letter', () => {
  const f = useWebStack({ worker: false })
  const kit = staffKit(f)

  it('sends a new code that verifies while the old one does not; replays by key; audits without the code', async () => {
    const staff = await kit.staffMember()
    const elevation = await kit.elevate(staff)
    const dead = await kit.deadSignUp()
    const headers = (key: string) => ({ ...staff.auth, 'x-elevation-token': elevation, 'idempotency-key': key })
    const path = `${BASE}/dead-letters/${dead.messageId}/reissues`

    expect((await f.stack.call('POST', path, undefined, { ...staff.auth, 'x-elevation-token': elevation })).body).to.include({
      code: 'idempotency_key_required',
    })
    const first = await f.stack.call('POST', path, undefined, headers('reissue-1'))
    expect(first.status).to.equal(201)
    const newMessageId = String(first.body!.messageId)
    expect(newMessageId).to.not.equal(dead.messageId)
    const replay = await f.stack.call('POST', path, undefined, headers('reissue-1'))
    expect(replay).to.deep.include({ status: 201, body: first.body })
    expect(replay.headers.get('idempotent-replayed')).to.equal('true')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ id: newMessageId }).first()).to.include({
      state: 'pending',
      attempt_count: 0,
    })
    const other = await kit.deadSignUp()
    const reused = await f.stack.call('POST', `${BASE}/dead-letters/${other.messageId}/reissues`, undefined, headers('reissue-1'))
    expect(reused.status, 'one key, another dead letter').to.equal(422)
    expect(reused.body).to.include({ code: 'idempotency_key_reused' })
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: other.challengeId })).to.have.length(1)

    // The worker delivers the new message like any other; the code in the email is the new one.
    const worker = await f.startWorker()
    let newCode: string
    try {
      const mail = await eventually(async () => (await inbox(f.stack.emulator.url, dead.email))[0], 'the reissued code email')
      newCode = /\b(\d{6})\b/.exec(mail.body.text ?? '')![1]!
    } finally {
      await worker.stop()
    }
    expect(newCode).to.not.equal(dead.oldCode)
    expect(
      (await f.stack.call('POST', '/sign-ups/confirmation', { identifier: dead.email, code: dead.oldCode, password })).status,
      'the old code',
    ).to.equal(422)
    expect(
      (await f.stack.call('POST', '/sign-ups/confirmation', { identifier: dead.email, code: newCode, password })).status,
      'the new code',
    ).to.equal(201)

    const audit = await f.db
      .owner('platform.audit_records')
      .where({ action: 'security_outbox.dead_letter_reissued', subject: dead.messageId })
    expect(audit).to.have.length(1)
    expect(audit[0]).to.include({ actor: staff.identityId })
    expect(JSON.stringify(audit[0])).not.to.include(newCode).and.not.to.include(dead.oldCode).and.not.to.include(dead.email)
  })

  it('enqueues at most one message for two concurrent reissues of one dead letter', async () => {
    const staff = await kit.staffMember()
    const elevation = await kit.elevate(staff)
    const dead = await kit.deadSignUp()
    const path = `${BASE}/dead-letters/${dead.messageId}/reissues`
    const answers = await Promise.all(
      ['a', 'b'].map((key) =>
        f.stack.call('POST', path, undefined, { ...staff.auth, 'x-elevation-token': elevation, 'idempotency-key': `concurrent-${key}` }),
      ),
    )
    expect(answers.map((answer) => answer.status).sort()).to.deep.equal([201, 409])
    expect(answers.find((answer) => answer.status === 409)!.body).to.include({ code: 'newer_message_exists' })
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
  })

  it('gives each refusal its own problem code', async () => {
    const staff = await kit.staffMember()
    const elevation = await kit.elevate(staff)
    const attempt = (messageId: string, key = uuidv7()) =>
      f.stack.call('POST', `${BASE}/dead-letters/${messageId}/reissues`, undefined, {
        ...staff.auth,
        'x-elevation-token': elevation,
        'idempotency-key': key,
      })
    const refusedWith = async (messageId: string, code: string, status = 409) => {
      const answer = await attempt(messageId)
      expect(answer.status, code).to.equal(status)
      expect(answer.body, code).to.include({ code })
    }
    for (const reason of ['superseded_by_resend', 'challenge_expired', 'challenge_consumed'])
      await refusedWith((await kit.deadSignUp(reason)).messageId, reason)
    const challengeChanges: [string, Record<string, unknown>][] = [
      ['challenge_expired', { expires_at: new Date(Date.now() - 1_000) }],
      ['challenge_consumed', { consumed_at: new Date() }],
      ['challenge_revoked', { revoked_at: new Date() }],
      ['challenge_out_of_attempts', { attempts_left: 0 }],
    ]
    for (const [code, change] of challengeChanges) {
      const dead = await kit.deadSignUp()
      await f.db.owner('identity.challenges').where({ id: dead.challengeId }).update(change)
      await refusedWith(dead.messageId, code)
    }
    // A newer code already went out to the same destination for the same purpose (a resend, say).
    const resent = await kit.deadSignUp()
    const dead = await f.db.owner('outbox.security_outbox_messages').where({ id: resent.messageId }).first()
    await f.db.owner('outbox.security_outbox_messages').insert({
      id: uuidv7(),
      purpose: dead.purpose,
      challenge_id: dead.challenge_id,
      channel: dead.channel,
      destination: dead.destination,
      state: 'published',
      published_at: new Date(),
      attempt_count: 0,
      expires_at: dead.expires_at,
    })
    await refusedWith(resent.messageId, 'newer_message_exists')

    const invitation = await insertInvitationDeadLetter(f.db.owner)
    await refusedWith(invitation, 'invitation_message')
    const notice = uuidv7()
    await f.db.owner('outbox.security_outbox_messages').insert({
      id: notice,
      purpose: 'security_notice',
      channel: 'email',
      destination: 'n@example.com',
      state: 'dead_lettered',
      dead_lettered_at: new Date(),
      expires_at: new Date(Date.now() + 86_400_000),
    })
    await f.db.owner('outbox.security_outbox_dead_letters').insert({ message_id: notice, reason: 'retries_exhausted' })
    await refusedWith(notice, 'security_notice_message')
    await refusedWith(uuidv7(), 'dead_letter_not_found', 404)
    await refusedWith(await insertOpenMessage(f.db.owner), 'dead_letter_not_found', 404)

    // The affected identity cannot reissue its own message, even as staff.
    const own = await kit.deadSignUp()
    const ownerOfIt = (await f.db.owner('identity.challenges').where({ id: own.challengeId }).first()).identity_id
    await f.db.owner('platform.staff_members').insert({ identity_id: ownerOfIt })
    await f.db.owner('identity.login_identifiers').where({ identity_id: ownerOfIt }).update({ verified_at: new Date() })
    await f.db.owner('identity.identities').where({ id: ownerOfIt }).update({ status: 'active' })
    await f.db
      .owner('identity.password_credentials')
      .insert({
        identity_id: ownerOfIt,
        password_hash: (await f.db.owner('identity.password_credentials').where({ identity_id: staff.identityId }).first()).password_hash,
      })
      .onConflict('identity_id')
      .merge()
    const session = await f.stack.call('POST', '/sessions', { identifier: own.email, password })
    const self = { token: String(session.body!.token), identityId: ownerOfIt as string, auth: f.stack.bearer(session.body!.token) }
    const selfElevation = await kit.elevate(self)
    const answer = await f.stack.call('POST', `${BASE}/dead-letters/${own.messageId}/reissues`, undefined, {
      ...self.auth,
      'x-elevation-token': selfElevation,
      'idempotency-key': 'own',
    })
    expect(answer.body).to.include({ code: 'own_message' })
    expect(
      await f.db.owner('platform.audit_records').where({ action: 'security_outbox.dead_letter_reissued', subject: own.messageId }),
    ).to.have.length(0)
  })

  it('refuses (409 destination_suppressed) to reissue a code to a suppressed destination until staff lift the suppression, then sends it', async () => {
    const staff = await kit.staffMember()
    const elevation = await kit.elevate(staff)
    const headers = { ...staff.auth, 'x-elevation-token': elevation }
    const dead = await kit.deadSignUp('destination_suppressed')
    const message = await f.db.owner('outbox.security_outbox_messages').where({ id: dead.messageId }).first()
    const suppressionId = uuidv7()
    // As the bounce webhook writes it: the destination's HMAC, masked, with the message that bounced.
    await f.db.owner('outbox.suppressed_destinations').insert({
      id: suppressionId,
      destination_hmac: message.destination_hmac,
      channel: message.channel,
      masked_destination: 'l•••t@e•••.com',
      reason: 'permanent_bounce',
      since: new Date(),
      message_id: dead.messageId,
    })
    const reissue = () =>
      f.stack.call('POST', `${BASE}/dead-letters/${dead.messageId}/reissues`, undefined, { ...headers, 'idempotency-key': uuidv7() })

    const refused = await reissue()
    expect(refused.status).to.equal(409)
    expect(refused.body).to.include({ code: 'destination_suppressed' })
    expect(String(refused.body!.title)).to.include('Lift the suppression')
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(1)

    expect((await f.stack.call('DELETE', `/platform-admin/suppressions/${suppressionId}`, undefined, headers)).status).to.equal(204)
    const sent = await reissue()
    expect(sent.status, JSON.stringify(sent.body)).to.equal(201)
    expect(await f.db.owner('outbox.security_outbox_messages').where({ challenge_id: dead.challengeId })).to.have.length(2)
  })

  it('refuses to resend to a destination the provider rejected: 409 reissue_refused_provider_rejected, nothing queued', async () => {
    const staff = await kit.staffMember()
    const rejected = await kit.deadSignUp('provider_rejected')
    const before = await f.db.owner('outbox.security_outbox_messages').count<{ count: string }[]>({ count: '*' })
    const answer = await f.stack.call('POST', `${BASE}/dead-letters/${rejected.messageId}/reissues`, undefined, {
      ...staff.auth,
      'x-elevation-token': await kit.elevate(staff),
      'idempotency-key': uuidv7(),
    })
    expect(answer.status).to.equal(409)
    expect(answer.body).to.include({ code: 'reissue_refused_provider_rejected' })
    expect(await f.db.owner('outbox.security_outbox_messages').count<{ count: string }[]>({ count: '*' })).to.deep.equal(before)
    expect(
      await f.db.owner('platform.audit_records').where({ action: 'security_outbox.dead_letter_reissued', subject: rejected.messageId }),
    ).to.have.length(0)
  })
})

/** A dead-lettered invitation message, as the owner writes it. */
async function insertInvitationDeadLetter(owner: Knex): Promise<string> {
  const admin = (await owner('identity.identities').first('id')).id
  const organizationId = uuidv7()
  await owner('organization.organizations').insert({ id: organizationId, name: 'Org', created_by: admin })
  const invitationId = uuidv7()
  await owner('organization.invitations').insert({
    id: invitationId,
    organization_id: organizationId,
    email: 'x@example.com',
    token_hash: randomBytes(32),
    invited_by: admin,
    expires_at: new Date(Date.now() + 86_400_000),
  })
  const id = uuidv7()
  await owner('outbox.security_outbox_messages').insert({
    id,
    purpose: 'invitation',
    invitation_id: invitationId,
    channel: 'email',
    destination: 'x@example.com',
    state: 'dead_lettered',
    dead_lettered_at: new Date(),
    expires_at: new Date(Date.now() + 86_400_000),
  })
  await owner('outbox.security_outbox_dead_letters').insert({ message_id: id, reason: 'retries_exhausted' })
  return id
}
