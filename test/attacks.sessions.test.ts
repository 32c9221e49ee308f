import { expect } from 'chai'
import type { Knex } from 'knex'
import { canonicalDestination, parseIdentifier } from '../src/identity/identifiers.ts'
import { bucketKey } from '../src/identity/secrets.ts'
import { eventually, uniqueEmail } from './support/helpers.ts'
import { useIdentityKit } from './support/identity-kit.ts'

/**
 * The attacks that let an intruder keep a session after the owner took the account back, performed
 * through the real routes; each test fails if the attack works.
 */
describe('attacks on sessions', () => {
  const { f, call, code, later, elevate } = useIdentityKit()

  /** An account made the way its owner makes it: sign-up, then the code and the password. */
  async function account(password: string) {
    const email = uniqueEmail('owner')
    expect((await call('POST', '/sign-ups', { identifier: email, password })).status).to.equal(202)
    const confirmed = await call('POST', '/sign-ups/confirmation', { identifier: email, code: await code(email), password })
    expect(confirmed.status).to.equal(201)
    const { identity_id: identityId } = await f.db.owner('identity.login_identifiers').where({ value: email }).first()
    return { email, identityId: identityId as string, auth: f.stack.bearer(confirmed.body!.token) }
  }

  /**
   * Holds, in a transaction of the test's own, the advisory lock sign-in takes on the email's
   * failure bucket (platform.rate_limit_window): a sign-in that has verified its password then
   * waits there, between its argon2 check and its session insert, until `release`.
   */
  async function holdSignInBucket(email: string) {
    const key = bucketKey(f.keys.codeHashKey, 'sign-in-failures:email', canonicalDestination(parseIdentifier(email)!))
    const trx: Knex.Transaction = await f.db.owner.transaction()
    await trx.raw(`SELECT pg_advisory_xact_lock(('x' || encode(substring(?::bytea FROM 1 FOR 8), 'hex'))::bit(64)::bigint)`, [key])
    const { rows } = await trx.raw<{ rows: { pid: number }[] }>('SELECT pg_backend_pid() AS pid')
    // Until a backend waits on this very transaction: the sign-in, past its argon2 check.
    const waiting = () =>
      eventually(async () => {
        const blocked = await f.db.owner.raw<{ rows: unknown[] }>('SELECT 1 FROM pg_stat_activity WHERE ? = ANY (pg_blocking_pids(pid))', [
          rows[0]!.pid,
        ])
        return blocked.rows.length > 0 ? true : undefined
      }, 'the sign-in to wait on the bucket')
    return { waiting, release: () => trx.rollback() }
  }

  const liveSessions = async (identityId: string) =>
    Number((await f.db.owner('identity.sessions').where({ identity_id: identityId }).whereNull('revoked_at').count('* as count'))[0]!.count)

  it('a sign-in racing the recovery survives "revoke every session": the old password verified before the recovery commits opens nothing after it', async () => {
    const oldPassword = 'the password the intruder knows'
    const owner = await account(oldPassword)

    // The intruder signs in with the old password; the test stops the sign-in after its argon2 check.
    const held = await holdSignInBucket(owner.email)
    const intruder = call('POST', '/sessions', { identifier: owner.email, password: oldPassword })
    await held.waiting()

    // Meanwhile the owner recovers the account: a new password, every session revoked.
    later(31)
    expect((await call('POST', '/password-recoveries', { identifier: owner.email })).status).to.equal(202)
    const recovered = await call('POST', '/password-recoveries/completion', {
      identifier: owner.email,
      code: await code(owner.email),
      newPassword: 'the owner took it back',
    })
    expect(recovered.status).to.equal(204)

    await held.release()
    const raced = await intruder
    expect(raced.status, 'the raced sign-in is refused').to.equal(401)
    expect(raced.body).to.include({ code: 'invalid_credentials' })
    expect(await liveSessions(owner.identityId), 'no session of the identity survives the recovery').to.equal(0)
    expect((await call('POST', '/sessions', { identifier: owner.email, password: 'the owner took it back' })).status).to.equal(201)
  })

  it('a sign-in racing a password change survives it: the old password verified before the change commits opens nothing after it', async () => {
    const oldPassword = 'the password the intruder knows'
    const owner = await account(oldPassword)
    const elevated = await elevate(owner)

    const held = await holdSignInBucket(owner.email)
    const intruder = call('POST', '/sessions', { identifier: owner.email, password: oldPassword })
    await held.waiting()
    const changed = await call('POST', '/password-changes', { currentPassword: oldPassword, newPassword: 'the owner changed it' }, elevated)
    expect(changed.status).to.equal(204)

    await held.release()
    expect((await intruder).status, 'the raced sign-in is refused').to.equal(401)
    expect(await liveSessions(owner.identityId), "only the owner's own session is left").to.equal(1)
    expect((await call('GET', '/sessions', undefined, owner.auth)).status).to.equal(200)
  })

  it('a session opened with a stolen password outlives the owner changing it: every other session is revoked', async () => {
    const oldPassword = 'the password the intruder knows'
    const owner = await account(oldPassword)
    const stolen = await call('POST', '/sessions', { identifier: owner.email, password: oldPassword })
    expect(stolen.status).to.equal(201)
    const intruder = f.stack.bearer(stolen.body!.token)
    expect((await call('GET', '/sessions', undefined, intruder)).status).to.equal(200)

    const changed = await call(
      'POST',
      '/password-changes',
      { currentPassword: oldPassword, newPassword: 'the owner changed it' },
      await elevate(owner),
    )
    expect(changed.status).to.equal(204)
    expect((await call('GET', '/sessions', undefined, intruder)).status, "the intruder's session is dead").to.equal(401)
    expect((await call('GET', '/sessions', undefined, owner.auth)).status, "the owner's own session goes on").to.equal(200)
    expect((await call('POST', '/sessions', { identifier: owner.email, password: oldPassword })).status).to.equal(401)
  })

  it('a stolen bearer token changes the password: not without a fresh step-up of that very session, nor with a wrong current password', async () => {
    const password = 'the owner chose this one'
    const owner = await account(password)
    const thief = await call('POST', '/sessions', { identifier: owner.email, password })
    const stolen = f.stack.bearer(thief.body!.token)
    const before = await f.db.owner('identity.password_credentials').where({ identity_id: owner.identityId }).first()

    const bare = await call('POST', '/password-changes', { currentPassword: password, newPassword: 'the thief wants this' }, stolen)
    expect(bare.status).to.equal(403)
    expect(bare.body).to.include({ code: 'elevation_required' })
    // The owner's elevation does not lend itself to another session.
    const ownersElevation = (await elevate(owner))['x-elevation-token']
    const borrowed = await call(
      'POST',
      '/password-changes',
      { currentPassword: password, newPassword: 'the thief wants this' },
      { ...stolen, 'x-elevation-token': ownersElevation },
    )
    expect(borrowed.status).to.equal(403)
    expect(borrowed.body).to.include({ code: 'elevation_required' })
    const wrong = await call(
      'POST',
      '/password-changes',
      { currentPassword: 'a guess at the password', newPassword: 'the owner wants this' },
      { ...owner.auth, 'x-elevation-token': ownersElevation },
    )
    expect(wrong.status).to.equal(403)
    expect(wrong.body).to.include({ code: 'wrong_password' })

    const after = await f.db.owner('identity.password_credentials').where({ identity_id: owner.identityId }).first()
    expect(after.password_hash, 'the password is unchanged').to.equal(before.password_hash)
    expect(await liveSessions(owner.identityId), 'no session was revoked').to.equal(2)
  })

  const trustedDevices = async (identityId: string) =>
    Number((await f.db.owner('identity.trusted_devices').where({ identity_id: identityId }).count('* as count'))[0]!.count)

  it("a stolen session signs out everywhere and strips the owner's trusted devices: not without a fresh step-up, and signing out forgets no device", async () => {
    const password = 'the owner signs up with this'
    const owner = await account(password)
    const thief = await call('POST', '/sessions', { identifier: owner.email, password })
    const stolen = f.stack.bearer(thief.body!.token)
    const devices = await trustedDevices(owner.identityId)
    expect(devices, 'the owner and the thief each signed in on a client of their own').to.equal(2)

    const bare = await call('DELETE', '/sessions', undefined, stolen)
    expect([bare.status, bare.body?.code]).to.deep.equal([403, 'elevation_required'])
    expect(await liveSessions(owner.identityId), 'no session was revoked').to.equal(2)
    expect(await trustedDevices(owner.identityId), 'no device was forgotten').to.equal(devices)

    const everywhere = await call('DELETE', '/sessions', undefined, await elevate(owner))
    expect(everywhere.status).to.equal(204)
    expect(await liveSessions(owner.identityId), 'every session is over').to.equal(0)
    expect(await trustedDevices(owner.identityId), "signing out everywhere keeps the owner's devices").to.equal(devices)
  })

  it('forgetting the trusted devices is a step-up action of its own', async () => {
    const owner = await account('the owner forgets devices')
    const bare = await call('DELETE', '/devices', undefined, owner.auth)
    expect([bare.status, bare.body?.code]).to.deep.equal([403, 'elevation_required'])
    expect(await trustedDevices(owner.identityId)).to.equal(1)
    expect((await call('DELETE', '/devices', undefined, await elevate(owner))).status).to.equal(204)
    expect(await trustedDevices(owner.identityId), 'forgotten').to.equal(0)
    expect(await liveSessions(owner.identityId), 'the sessions go on').to.equal(1)
  })
})
