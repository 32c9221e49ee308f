import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { deliverBatch, deliverOne } from './support/run-once.ts'
import { DeliveryFailureError, type Provider } from '../src/providers/provider.ts'
import { InvalidInvitationError } from '../src/identity/errors.ts'
import { acceptInvitation, inviteTx, revokeInvitation } from '../src/organization/invitations.ts'
import { startSesEmulator } from '../src/providers/ses/emulator.ts'
import { startFakeWasender } from '../src/providers/wasender/fake.ts'
import { createVerifiedIdentity, eventually, uniqueEmail, uniquePhone } from './support/helpers.ts'
import { productionEnvironment, spawnWorker } from './support/processes.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

describe('invitation messages in the worker', () => {
  const f = useOutboxFixture()
  const { message, ciphertexts, deadLetter, suppress, expectDeadLetteredUnsent } = f.rows

  /** An organization with one admin, and an invitation from it whose message is queued. */
  async function invite(email = uniqueEmail('invitee')) {
    const { identityId: adminId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('admin'))
    const organizationId = uuidv7()
    await f.db.owner('organization.organizations').insert({ id: organizationId, name: 'Acme Research', created_by: adminId })
    await f.db.owner('organization.memberships').insert({ organization_id: organizationId, identity_id: adminId, role: 'admin' })
    const deps = {
      boss: f.harness.webBoss,
      outboxKey: f.keys.outboxKey,
      codeHashKey: f.keys.codeHashKey,
      invitationTtlSeconds: 7 * 86_400,
      clock: () => f.now,
    }
    const { invitationId } = await f.harness.api.transaction((trx) => inviteTx(trx, deps, { organizationId, inviterId: adminId, email }))
    const row = await f.db.owner('outbox.security_outbox_messages').where({ invitation_id: invitationId }).first()
    return { adminId, organizationId, invitationId, messageId: row.id as string, email, deps }
  }
  const emailProvider = (script: Parameters<typeof scriptedProvider>[0] = (call) => ({ providerMessageId: `p-${call}` })) =>
    scriptedProvider(script)
  const tokenFrom = (text: string) => /\/join#token=([A-Za-z0-9_-]+)/.exec(text)?.[1]

  it('opens the token only to build the join link, and the email names the organization', async () => {
    const { messageId, email } = await invite()
    const provider = emailProvider()
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(1)
    const sent = provider.calls[0]!
    expect(sent.destination).to.equal(email)
    expect(sent.text)
      .to.include('Acme Research')
      .and.to.match(/https:\/\/app\.sealpost\.test\/join#token=[A-Za-z0-9_-]{43}\b/)
    expect(await message(messageId)).to.include({ state: 'published', attempt_count: 1 })
    expect(await ciphertexts(messageId)).to.equal(0)
  })

  it('sends no invitation to a suppressed address: the full claim path asks the suppression list itself', async () => {
    const { messageId } = await invite()
    await suppress(messageId, 'complaint')
    const provider = emailProvider()
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(0)
    await expectDeadLetteredUnsent(messageId, 'destination_suppressed')
  })

  it('a mixed batch (a suppressed invitation through the full path, a suppressed code through the common case, an open code) sends only the open one', async () => {
    const { messageId: invitation } = await invite()
    const { messageId: blocked } = await f.harness.enqueue(uniqueEmail('blocked'))
    const openEmail = uniqueEmail('open')
    const { messageId: open } = await f.harness.enqueue(openEmail)
    await suppress(invitation, 'complaint')
    await suppress(blocked)
    const jobs = [await f.harness.nextJob(), await f.harness.nextJob(), await f.harness.nextJob()]
    const provider = emailProvider()
    await deliverBatch(f.harness.deps({ email: provider }), jobs)
    expect(provider.calls.map((call) => call.destination)).to.deep.equal([openEmail])
    for (const id of [invitation, blocked]) expect(await deadLetter(id)).to.include({ reason: 'destination_suppressed' })
    expect(await message(open)).to.include({ state: 'published' })
  })

  it('sends nothing for an invitation revoked before its send: invitation_revoked, ciphertext gone', async () => {
    const { messageId, organizationId, invitationId, adminId } = await invite()
    await revokeInvitation(f.harness.api, { organizationId, invitationId, identityId: adminId }, f.now)
    const provider = emailProvider()
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(0)
    await expectDeadLetteredUnsent(messageId, 'invitation_revoked')
  })

  it('never leases the message of an invitation closed behind its back (claim guard)', async () => {
    for (const [status, reason] of [
      ['revoked', 'invitation_revoked'],
      ['accepted', 'invitation_accepted'],
      ['expired', 'invitation_expired'],
    ] as const) {
      const { messageId, invitationId, adminId } = await invite()
      // Closed without the web's function (an older release, an operator's UPDATE): the message is still pending.
      await f.db
        .owner('organization.invitations')
        .where({ id: invitationId })
        .update({
          status,
          ...(status === 'revoked' ? { revoked_at: f.now } : {}),
          ...(status === 'accepted' ? { accepted_at: f.now, accepted_by: adminId } : {}),
        })
      const provider = emailProvider()
      await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
      expect(provider.calls, status).to.have.length(0)
      expect(await message(messageId), status).to.include({ state: 'dead_lettered', attempt_count: 0, lease_job_id: null })
      expect(await deadLetter(messageId), status).to.include({ reason })
      expect(await ciphertexts(messageId), status).to.equal(0)
    }
  })

  it('does not requeue an attempt whose invitation was accepted while it was out (record guard)', async () => {
    const { messageId, invitationId, adminId } = await invite()
    const provider: Provider = {
      id: 'ses',
      channel: 'email',
      async dispatch() {
        await f.db
          .owner('organization.invitations')
          .where({ id: invitationId })
          .update({ status: 'accepted', accepted_at: f.now, accepted_by: adminId })
        throw new DeliveryFailureError('UNAVAILABLE', 'ServiceUnavailable')
      },
    }
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(await message(messageId)).to.include({ state: 'dead_lettered', attempt_count: 1 })
    expect(await deadLetter(messageId)).to.include({ reason: 'invitation_accepted', last_failure_class: 'UNAVAILABLE' })
    expect(await ciphertexts(messageId)).to.equal(0)
  })

  it('accepts a token once; after a revoke the token no longer accepts', async () => {
    const first = await invite()
    const provider = emailProvider()
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    const token = tokenFrom(provider.calls[0]!.text)!
    const { identityId: invitee } = await createVerifiedIdentity(f.db.owner, first.email)
    expect(await acceptInvitation(f.harness.api, { identityId: invitee, token }, f.now)).to.deep.equal({
      organizationId: first.organizationId,
    })
    expect(
      await f.db.owner('organization.memberships').where({ organization_id: first.organizationId, identity_id: invitee }).first(),
    ).to.include({ role: 'member' })
    const again = await acceptInvitation(f.harness.api, { identityId: invitee, token }, f.now).catch((error: unknown) => error)
    expect(again).to.be.instanceOf(InvalidInvitationError)

    const second = await invite()
    const secondProvider = emailProvider()
    await deliverOne(f.harness.deps({ email: secondProvider }), await f.harness.nextJob())
    const secondToken = tokenFrom(secondProvider.calls[0]!.text)!
    await revokeInvitation(
      f.harness.api,
      { organizationId: second.organizationId, invitationId: second.invitationId, identityId: second.adminId },
      f.now,
    )
    const revoked = await acceptInvitation(f.harness.api, { identityId: invitee, token: secondToken }, f.now).catch(
      (error: unknown) => error,
    )
    expect(revoked).to.be.instanceOf(InvalidInvitationError)
    expect(
      await f.db.owner('organization.memberships').where({ organization_id: second.organizationId, identity_id: invitee }).first(),
    ).to.equal(undefined)
  })

  it("refuses an expired token, and dead-letters an expired invitation's unsent message invitation_expired", async () => {
    const sent = await invite()
    const provider = emailProvider()
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    const token = tokenFrom(provider.calls[0]!.text)!
    const unsent = await invite()

    f.now = new Date(f.now.getTime() + 8 * 86_400_000)
    const { identityId: invitee } = await createVerifiedIdentity(f.db.owner, sent.email)
    const refused = await acceptInvitation(f.harness.api, { identityId: invitee, token }, f.now).catch((error: unknown) => error)
    expect(refused).to.be.instanceOf(InvalidInvitationError)
    await deliverOne(f.harness.deps({ email: provider }), await f.harness.nextJob())
    expect(provider.calls).to.have.length(1)
    expect(await deadLetter(unsent.messageId)).to.include({ reason: 'invitation_expired' })
    expect(await ciphertexts(unsent.messageId)).to.equal(0)
  })

  it('in production without INVITATION_LINK_BASE_URL (or with an http:// one) the worker refuses to start, naming it, and no message spends an attempt', async function () {
    this.timeout(60_000)
    const fake = await startFakeWasender('key')
    const emulator = await startSesEmulator(0)
    try {
      const invitation = await invite()
      const phone = uniquePhone()
      const code = await f.harness.enqueue(phone)
      const environment = (link: string | undefined) => {
        const env = productionEnvironment({
          apiUrl: f.db.apiUrl,
          workerUrl: f.db.workerUrl,
          keys: f.keys,
          sesEndpoint: emulator.url,
          wasenderUrl: fake.url,
          wasenderKey: 'key',
        })
        if (link === undefined) delete env.INVITATION_LINK_BASE_URL
        else env.INVITATION_LINK_BASE_URL = link
        return env
      }
      for (const [link, problem] of [
        [undefined, /INVITATION_LINK_BASE_URL: is required for the worker process in production/],
        ['http://app.sealpost.test', /INVITATION_LINK_BASE_URL: must be an https:\/\/ URL in production/],
      ] as const) {
        const refused = spawnWorker(environment(link))
        expect(await refused.exited, refused.output()).to.equal(1)
        expect(refused.output()).to.match(problem)
      }
      for (const messageId of [invitation.messageId, code.messageId]) {
        expect(await message(messageId), 'nothing was attempted').to.include({ state: 'pending', attempt_count: 0 })
      }

      const worker = spawnWorker(environment('https://app.sealpost.test'))
      try {
        for (const messageId of [invitation.messageId, code.messageId]) {
          await eventually(
            async () => ((await message(messageId)).state === 'published' ? true : undefined),
            'both messages to be delivered',
            20_000,
          )
        }
      } finally {
        worker.child.kill('SIGTERM')
        await worker.exited
      }
      expect(fake.accepted().map((request) => request.to)).to.deep.equal([phone])
      expect(await message(invitation.messageId)).to.include({ attempt_count: 1 })
    } finally {
      await fake.stop()
      await emulator.stop()
    }
  })
})
