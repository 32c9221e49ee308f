import { expect } from 'chai'
import { SESSION_IDLE_SECONDS, SESSION_TOUCH_SECONDS } from '../src/identity/sessions.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'
import { newestSealed } from './support/sealed-codes.ts'

/** Sessions as their owner sees and ends them, and the password change, through the real routes on the kit's clock. */
describe('sessions and the password change, as their owner uses them', () => {
  const { f, call, code, later, elevate } = useIdentityKit()

  async function account(password = 'the owner chose this one') {
    const email = uniqueEmail('owner')
    expect((await call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const confirmed = await call('POST', '/sign-ups/confirmation', { identifier: email, code: await code(email), password })
    expect(confirmed.status).to.equal(201)
    const { identity_id: identityId } = await f.db.owner('identity.login_identifiers').where({ value: email }).first()
    return { email, password, identityId: identityId as string, auth: f.stack.bearer(confirmed.body!.token) }
  }
  const signIn = async (who: { email: string; password: string }) => {
    const answer = await call('POST', '/sessions', { identifier: who.email, password: who.password })
    expect(answer.status).to.equal(201)
    return f.stack.bearer(answer.body!.token)
  }
  const lastUsed = async (identityId: string) =>
    (await f.db.owner('identity.sessions').where({ identity_id: identityId }).first()).last_used_at as Date

  describe('the idle timeout', () => {
    it(`ends a session unused for ${SESSION_IDLE_SECONDS / 60} minutes, long before its absolute expiry`, async () => {
      const owner = await account()
      later(SESSION_IDLE_SECONDS - 1)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status, 'used just in time').to.equal(200)
      later(SESSION_IDLE_SECONDS - 1)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status, 'each use starts the idle time over').to.equal(200)
      later(SESSION_IDLE_SECONDS)
      const idle = await call('GET', '/sessions', undefined, owner.auth)
      expect(idle.status, 'idle too long').to.equal(401)
      expect(idle.body).to.include({ code: 'unauthenticated' })
    })

    it('marks a use at most once a minute: requests in between write nothing', async () => {
      const owner = await account()
      const created = await lastUsed(owner.identityId)
      later(SESSION_TOUCH_SECONDS - 1)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status).to.equal(200)
      expect(await lastUsed(owner.identityId), 'not moved within the minute').to.deep.equal(created)
      later(1)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status).to.equal(200)
      const moved = await lastUsed(owner.identityId)
      expect(moved.getTime() - created.getTime(), 'moved once a minute has passed').to.equal(SESSION_TOUCH_SECONDS * 1000)
    })

    it('counts a session the previous release inserted, without a mark of use, as used when it was created', async () => {
      const owner = await account()
      await f.db.owner('identity.sessions').where({ identity_id: owner.identityId }).update({ last_used_at: null })
      later(SESSION_IDLE_SECONDS - 1)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status).to.equal(200)
      expect(await lastUsed(owner.identityId), 'marked on its first use').to.be.instanceOf(Date)
    })
  })

  describe('GET /sessions and DELETE /sessions', () => {
    it('lists the live sessions of the caller alone, newest first, the current one flagged, without any token', async () => {
      const owner = await account()
      later(5)
      const second = await signIn(owner)
      await signIn(await account())
      const revoked = await signIn(owner)
      expect((await call('DELETE', '/sessions/current', undefined, revoked)).status).to.equal(204)

      const listed = await call('GET', '/sessions', undefined, second)
      expect(listed.status).to.equal(200)
      const sessions = listed.body!.sessions as Record<string, unknown>[]
      expect(
        sessions.map((s) => s.current),
        'the other live session of the owner, after this one',
      ).to.deep.equal([true, false])
      expect(Object.keys(sessions[0]!).sort()).to.deep.equal(['createdAt', 'current', 'expiresAt', 'id', 'lastUsedAt'])
      const raw = JSON.stringify(listed.body)
      for (const header of [owner.auth, second]) expect(raw).not.to.include(header.authorization.slice('Bearer '.length))
    })

    it('signs out everywhere with a fresh step-up: every session of the caller stops working, the one that asked too, and nobody else’s', async () => {
      const owner = await account()
      const other = await signIn(owner)
      const stranger = await account()
      const everywhere = await call('DELETE', '/sessions', undefined, await elevate(owner))
      expect(everywhere.status).to.equal(204)
      for (const auth of [owner.auth, other]) expect((await call('GET', '/sessions', undefined, auth)).status).to.equal(401)
      expect((await call('GET', '/sessions', undefined, stranger.auth)).status, 'another identity is untouched').to.equal(200)
      expect((await call('DELETE', '/sessions')).status, 'not without a session').to.equal(401)
    })
  })

  describe('POST /password-changes', () => {
    it('sets the new password, keeps this session, revokes the others and tells every verified identifier', async () => {
      const owner = await account()
      const other = await signIn(owner)
      const changed = await call(
        'POST',
        '/password-changes',
        { currentPassword: owner.password, newPassword: 'a brand new password' },
        await elevate(owner),
      )
      expect(changed.status).to.equal(204)
      expect((await call('GET', '/sessions', undefined, owner.auth)).status, 'this session goes on').to.equal(200)
      expect((await call('GET', '/sessions', undefined, other)).status, 'the other one is over').to.equal(401)
      expect((await call('POST', '/sessions', { identifier: owner.email, password: owner.password })).status).to.equal(401)
      expect((await call('POST', '/sessions', { identifier: owner.email, password: 'a brand new password' })).status).to.equal(201)
      const notice = await newestSealed(f.db, f.keys, owner.email)
      expect(notice.purpose).to.equal('security_notice')
      expect(JSON.parse(notice.text)).to.include({ event: 'password_changed' })
      expect(notice.text).not.to.include('a brand new password')
    })

    it('refuses bad input with a 4xx problem and changes nothing', async () => {
      const owner = await account()
      const elevated = await elevate(owner)
      const before = await f.db.owner('identity.password_credentials').where({ identity_id: owner.identityId }).first()
      const bodies: unknown[] = [
        {},
        { currentPassword: owner.password },
        { currentPassword: owner.password, newPassword: 'short' },
        { currentPassword: owner.password, newPassword: 'x'.repeat(201) },
        { currentPassword: '', newPassword: 'a brand new password' },
        { currentPassword: owner.password, newPassword: 'a brand new password', isAdmin: true },
        { currentPassword: 12345678901, newPassword: 'a brand new password' },
        [],
        '{"currentPassword":',
      ]
      for (const body of bodies) {
        const answer = await f.stack.call('POST', '/password-changes', body, elevated)
        expect(answer.status, JSON.stringify(body)).to.be.within(400, 499)
        expect(answer.body?.code, JSON.stringify(body)).to.be.a('string')
      }
      const after = await f.db.owner('identity.password_credentials').where({ identity_id: owner.identityId }).first()
      expect(after).to.deep.equal(before)
      expect(
        await f.db.owner('outbox.security_outbox_messages').where({ purpose: 'security_notice', destination: owner.email }),
        'no notice',
      ).to.have.length(0)
    })

    it('allows 5 attempts an hour per identity, right or wrong, then answers 429', async () => {
      const owner = await account()
      const elevated = await elevate(owner)
      for (let attempt = 0; attempt < 5; attempt += 1) {
        const wrong = await call(
          'POST',
          '/password-changes',
          { currentPassword: 'a wrong guess', newPassword: 'a brand new password' },
          elevated,
        )
        expect(wrong.status).to.equal(403)
      }
      const limited = await call(
        'POST',
        '/password-changes',
        { currentPassword: owner.password, newPassword: 'a brand new password' },
        elevated,
      )
      expect(limited.status).to.equal(429)
      expect(limited.body).to.include({ code: 'identity_rate_limited' })
    })
  })
})
