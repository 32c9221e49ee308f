import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { DESTINATION_BUDGET } from '../src/identity/challenges.ts'
import { INVITATION_LIMITS, ORGANIZATION_LIMITS } from '../src/organization/invitations.ts'
import { columnsContaining, eventually, inbox, uniqueEmail } from './support/helpers.ts'
import { useWebStack } from './support/web-stack.ts'

describe('organization invitations, as a client makes them', () => {
  const f = useWebStack()
  const password = 'correct horse battery'

  async function emailTo(address: string, nth: number) {
    const mails = await eventually(async () => {
      const found = await inbox(f.stack.emulator.url, address)
      return found.length >= nth ? found : undefined
    }, `email #${nth} to ${address}`)
    return mails[nth - 1]!
  }
  /** Signs up through the API (the code from the emulator) and signs in; the bearer headers. */
  async function account(email = uniqueEmail('member')) {
    const earlier = (await inbox(f.stack.emulator.url, email)).length
    expect((await f.stack.call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const code = /\b(\d{6})\b/.exec((await emailTo(email, earlier + 1)).body.text ?? '')![1]
    expect((await f.stack.call('POST', '/sign-ups/confirmation', { identifier: email, code, password })).status).to.equal(201)
    const session = await f.stack.call('POST', '/sessions', { identifier: email, password })
    return { email, auth: f.stack.bearer(session.body!.token) }
  }
  async function organization(auth: Record<string, string>, name = 'Acme Research') {
    const created = await f.stack.call('POST', '/organizations', { name }, auth)
    expect(created.status).to.equal(201)
    return String(created.body!.id)
  }

  it('admin invites → the join link arrives → the invitee signs up, signs in and accepts once', async () => {
    const admin = await account(uniqueEmail('admin'))
    const organizationId = await organization(admin.auth)
    const inviteeEmail = uniqueEmail('invitee')

    const invited = await f.stack.call('POST', `/organizations/${organizationId}/invitations`, { email: inviteeEmail }, admin.auth)
    expect(invited.status).to.equal(202)
    expect(invited.body).to.have.keys('invitationId', 'expiresAt')
    const mail = await emailTo(inviteeEmail, 1)
    expect(mail.subject).to.equal('You have been invited to an organization')
    expect(mail.body.text).to.include('Acme Research')
    const link = /https:\/\/app\.sealpost\.test\/join#token=([A-Za-z0-9_-]{43})\b/.exec(mail.body.text ?? '')
    expect(link, `the join link in: ${mail.body.text}`).to.not.equal(null)
    const token = link![1]!

    const invitee = await account(inviteeEmail)
    const accepted = await f.stack.call('POST', '/invitations/acceptance', { token }, invitee.auth)
    expect(accepted).to.deep.include({ status: 201, body: { organizationId } })
    const membership = await f.db.owner('organization.memberships').where({ organization_id: organizationId }).orderBy('role')
    expect(membership.map((row) => row.role)).to.deep.equal(['admin', 'member'])
    const replay = await f.stack.call('POST', '/invitations/acceptance', { token }, invitee.auth)
    expect(replay).to.deep.include({ status: 422 })
    expect(replay.body).to.include({ code: 'invalid_invitation' })

    // Acceptance 5: neither the token nor the link is stored, queued or logged anywhere.
    for (const secret of [token, link![0]]) {
      expect(await columnsContaining(f.db.owner, secret), secret.slice(0, 12)).to.deep.equal([])
      expect(f.logs.text()).not.to.include(secret)
    }
    const jobs = await f.db.owner('pgboss.job').where({ name: 'security-outbox' }).select('data')
    for (const job of jobs) expect(Object.keys(job.data)).to.deep.equal(['messageId'])
    expect((await f.db.owner('organization.invitations').where({ organization_id: organizationId }).first()).token_hash).to.have.length(32)
  })

  it("refuses a non-admin, another organization's id and a malformed id with the same 403", async () => {
    const admin = await account(uniqueEmail('admin'))
    const ours = await organization(admin.auth)
    const stranger = await account(uniqueEmail('stranger'))
    const theirs = await organization(stranger.auth, 'Other Org')

    for (const [who, organizationId] of [
      [stranger, ours],
      [admin, theirs],
      [admin, 'not-a-uuid'],
      [admin, uuidv7()],
    ] as const) {
      const refused = await f.stack.call('POST', `/organizations/${organizationId}/invitations`, { email: uniqueEmail('x') }, who.auth)
      expect(refused.status, organizationId).to.equal(403)
      expect(refused.body).to.include({ code: 'not_organization_admin' })
    }
    const revoke = await f.stack.call('DELETE', `/organizations/${ours}/invitations/${uuidv7()}`, undefined, stranger.auth)
    expect(revoke.status).to.equal(403)
    expect((await f.stack.call('POST', `/organizations/${ours}/invitations`, { email: uniqueEmail('x') })).status, 'no bearer').to.equal(
      401,
    )
    expect((await f.stack.call('POST', `/organizations/${ours}/invitations`, { email: '+5491155554455' }, admin.auth)).body).to.include({
      code: 'invalid_email',
    })
    expect(await f.db.owner('organization.invitations').where({ organization_id: theirs })).to.have.length(0)
  })

  it('answers each limit with its own problem code, counted in the database', async () => {
    const admin = await account(uniqueEmail('admin'))

    // Pending cap: the organization already has the maximum of live invitations.
    const crowded = await organization(admin.auth, 'Crowded')
    const adminId = (await f.db.owner('organization.memberships').where({ organization_id: crowded }).first()).identity_id
    await f.db.owner('organization.invitations').insert(
      Array.from({ length: INVITATION_LIMITS.pendingPerOrganization }, (_, i) => ({
        id: uuidv7(),
        organization_id: crowded,
        email: `pending-${i}@example.com`,
        token_hash: Buffer.alloc(32, i),
        invited_by: adminId,
        expires_at: new Date(Date.now() + 86_400_000),
        created_at: new Date(Date.now() - 2 * 3_600_000),
      })),
    )
    const capped = await f.stack.call('POST', `/organizations/${crowded}/invitations`, { email: uniqueEmail('x') }, admin.auth)
    expect(capped.status).to.equal(409)
    expect(capped.body).to.include({ code: 'pending_invitation_limit' })

    // Per-organization rate.
    const busy = await organization(admin.auth, 'Busy')
    for (let i = 0; i < INVITATION_LIMITS.perOrganizationPerHour; i++) {
      expect(
        (await f.stack.call('POST', `/organizations/${busy}/invitations`, { email: uniqueEmail('rate') }, admin.auth)).status,
      ).to.equal(202)
    }
    const rated = await f.stack.call('POST', `/organizations/${busy}/invitations`, { email: uniqueEmail('rate') }, admin.auth)
    expect(rated.status).to.equal(429)
    expect(rated.body).to.include({ code: 'invitation_rate_limited' })
    expect(Number(rated.headers.get('retry-after'))).to.be.within(1, 3_600)

    // Per address and organization (a +tag is the same mailbox).
    const third = await organization(admin.auth, 'Third')
    const target = uniqueEmail('popular')
    for (let i = 0; i < INVITATION_LIMITS.perAddressPerOrganizationPerDay; i++) {
      expect(
        (await f.stack.call('POST', `/organizations/${third}/invitations`, { email: target.replace('@', `+${i}@`) }, admin.auth)).status,
      ).to.equal(202)
    }
    const addressed = await f.stack.call('POST', `/organizations/${third}/invitations`, { email: target }, admin.auth)
    expect(addressed.status).to.equal(429)
    expect(addressed.body).to.include({ code: 'invitation_address_rate_limited' })
    expect(Number(addressed.headers.get('retry-after'))).to.be.within(1, 86_400)

    // Organizations per identity and day.
    for (let i = 3; i < ORGANIZATION_LIMITS.perIdentityPerDay; i++) await organization(admin.auth, `Org ${i}`)
    const sixth = await f.stack.call('POST', '/organizations', { name: 'One too many' }, admin.auth)
    expect(sixth.status).to.equal(429)
    expect(sixth.body).to.include({ code: 'organization_rate_limited' })
    expect(Number(sixth.headers.get('retry-after'))).to.be.within(1, 86_400)
    expect(await f.db.owner('organization.organizations').where({ created_by: adminId })).to.have.length(
      ORGANIZATION_LIMITS.perIdentityPerDay,
    )
  })

  it('stops one inviter past its daily invitations, across all the organizations it administers', async () => {
    const admin = await account(uniqueEmail('admin'))
    const organizations = [
      await organization(admin.auth, 'One'),
      await organization(admin.auth, 'Two'),
      await organization(admin.auth, 'Three'),
    ]
    for (let i = 0; i < INVITATION_LIMITS.perInviterPerDay; i++) {
      const org = organizations[Math.floor(i / INVITATION_LIMITS.perOrganizationPerHour)]!
      expect(
        (await f.stack.call('POST', `/organizations/${org}/invitations`, { email: uniqueEmail('bulk') }, admin.auth)).status,
        `#${i + 1}`,
      ).to.equal(202)
    }
    const refused = await f.stack.call('POST', `/organizations/${organizations[2]}/invitations`, { email: uniqueEmail('bulk') }, admin.auth)
    expect(refused.status).to.equal(429)
    expect(refused.body).to.include({ code: 'invitation_inviter_rate_limited' })
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 86_400)
  })

  it('lets no throw-away organizations use up a person’s invitations: the real organization still invites them', async () => {
    const attacker = await account(uniqueEmail('attacker'))
    const victim = uniqueEmail('victim')
    const answers: number[] = []
    for (let i = 0; i < 5; i++) {
      const throwAway = await organization(attacker.auth, `Throw-away ${i}`)
      answers.push(
        (await f.stack.call('POST', `/organizations/${throwAway}/invitations`, { email: victim.replace('@', `+${i}@`) }, attacker.auth))
          .status,
      )
    }
    const employer = await account(uniqueEmail('employer'))
    const real = await organization(employer.auth, 'The real one')
    const invited = await f.stack.call('POST', `/organizations/${real}/invitations`, { email: victim }, employer.auth)
    expect(invited.status, 'the organization that means it').to.equal(202)
    expect(answers, 'the attacker is stopped at its own per-address budget').to.deep.equal([202, 202, 202, 429, 429])
  })

  it('a crowd of inviters mail-bombs one mailbox: invitations spend its hourly destination budget like codes, and past it the inviter gets 429 rate_limited with nothing enqueued', async () => {
    const victim = uniqueEmail('victim')
    // Each inviter stays inside every per-inviter and per-organization limit: three invitations each.
    const perInviter = INVITATION_LIMITS.perAddressPerInviterPerDay
    const inviters = Math.ceil(DESTINATION_BUDGET.ceiling.max / perInviter)
    for (let i = 0; i < inviters; i++) {
      const attacker = await account(uniqueEmail('crowd'))
      const org = await organization(attacker.auth, `Crowd ${i}`)
      for (let j = 0; j < perInviter; j++) {
        const sent = await f.stack.call(
          'POST',
          `/organizations/${org}/invitations`,
          { email: victim.replace('@', `+${i}-${j}@`) },
          attacker.auth,
        )
        expect(sent.status, `inviter ${i}, invitation ${j}`).to.equal(202)
      }
    }
    const messages = () =>
      f.db
        .owner('outbox.security_outbox_messages')
        .where({ purpose: 'invitation' })
        .whereLike('destination', `${victim.split('@')[0]}%`)
    const before = (await messages()).length
    expect(before).to.equal(DESTINATION_BUDGET.ceiling.max)

    const one = await account(uniqueEmail('one-more'))
    const org = await organization(one.auth, 'One more')
    const refused = await f.stack.call('POST', `/organizations/${org}/invitations`, { email: victim }, one.auth)
    expect(refused.status).to.equal(429)
    expect(refused.body).to.include({ code: 'rate_limited' })
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3_600)
    expect(await messages(), 'nothing enqueued').to.have.length(before)
    expect(await f.db.owner('organization.invitations').where({ organization_id: org }), 'no invitation row').to.have.length(0)
  })

  it('refuses a forwarded invitation link to another account, and the invited person can still accept', async () => {
    const admin = await account(uniqueEmail('admin'))
    const organizationId = await organization(admin.auth)
    const inviteeEmail = uniqueEmail('invitee')
    expect(
      (await f.stack.call('POST', `/organizations/${organizationId}/invitations`, { email: inviteeEmail }, admin.auth)).status,
    ).to.equal(202)
    const token = /#token=([A-Za-z0-9_-]{43})\b/.exec((await emailTo(inviteeEmail, 1)).body.text ?? '')![1]!

    const forwardedTo = await account(uniqueEmail('forwarded-to'))
    const refused = await f.stack.call('POST', '/invitations/acceptance', { token }, forwardedTo.auth)
    expect(refused.status).to.equal(422)
    expect(refused.body).to.include({ code: 'invalid_invitation' })
    // Claiming the invited address without verifying it (an unconfirmed sign-in method) is not enough either.
    const forwardedToId = (await f.db.owner('identity.login_identifiers').where({ value: forwardedTo.email }).first()).identity_id
    await f.db
      .owner('identity.login_identifiers')
      .insert({ id: uuidv7(), identity_id: forwardedToId, kind: 'email', value: inviteeEmail, verified_at: null })
    const unverified = await f.stack.call('POST', '/invitations/acceptance', { token }, forwardedTo.auth)
    expect(unverified.body).to.include({ code: 'invalid_invitation' })
    expect((await f.db.owner('organization.invitations').where({ organization_id: organizationId }).first()).status).to.equal('pending')
    expect(await f.db.owner('organization.memberships').where({ organization_id: organizationId })).to.have.length(1)

    const invitee = await account(inviteeEmail)
    const accepted = await f.stack.call('POST', '/invitations/acceptance', { token }, invitee.auth)
    expect(accepted).to.deep.include({ status: 201, body: { organizationId } })
  })

  it('refuses organization names that carry a link, an address or forged lines, and stores the NFKC form', async () => {
    const admin = await account(uniqueEmail('admin'))
    for (const name of [
      'Security team: verify at https://evil.example',
      'Acme www.evil',
      'Verify at evil。com',
      'evil[.]com',
      'https：／／evil',
      'Write to boss@evil',
      'Acme\u2028Verify now',
      'Acme \u202Emoc.live',
      'evil\u200B.com',
      'Acme Billing: call +1 (415) 555-0132',
    ]) {
      const refused = await f.stack.call('POST', '/organizations', { name }, admin.auth)
      expect(refused.status, JSON.stringify(name)).to.equal(422)
      expect(refused.body, JSON.stringify(name)).to.include({ code: 'invalid_organization_name' })
    }
    const created = await organization(admin.auth, 'Ａｃｍｅ  Labs')
    expect((await f.db.owner('organization.organizations').where({ id: created }).first()).name).to.equal('Acme Labs')
  })

  it('re-inviting an address revokes the previous invitation and dead-letters its unsent message', async () => {
    const admin = await account(uniqueEmail('admin'))
    const organizationId = await organization(admin.auth)
    const email = uniqueEmail('twice')
    const first = await f.stack.call('POST', `/organizations/${organizationId}/invitations`, { email }, admin.auth)
    const second = await f.stack.call('POST', `/organizations/${organizationId}/invitations`, { email }, admin.auth)
    expect(second.status).to.equal(202)
    const rows = await f.db.owner('organization.invitations').where({ organization_id: organizationId }).orderBy('created_at')
    expect(rows.map((row) => [row.id, row.status])).to.deep.equal([
      [first.body!.invitationId, 'revoked'],
      [second.body!.invitationId, 'pending'],
    ])
    const firstMessage = await f.db.owner('outbox.security_outbox_messages').where({ invitation_id: first.body!.invitationId }).first()
    // Either the worker had already sent it (published) or the revoke dead-lettered it unsent.
    if (firstMessage.state === 'dead_lettered') {
      expect((await f.db.owner('outbox.security_outbox_dead_letters').where({ message_id: firstMessage.id }).first()).reason).to.equal(
        'invitation_revoked',
      )
    } else {
      expect(firstMessage.state).to.equal('published')
    }
    expect(await f.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: firstMessage.id }).first()).to.equal(undefined)
    const revoked = await f.stack.call(
      'DELETE',
      `/organizations/${organizationId}/invitations/${String(second.body!.invitationId)}`,
      undefined,
      admin.auth,
    )
    expect(revoked.status).to.equal(204)
    expect((await f.db.owner('organization.invitations').where({ id: second.body!.invitationId }).first()).status).to.equal('revoked')
  })
})
