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
  const { f, call, code, later } = useIdentityKit()

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
    const waiting = () =>
      eventually(async () => {
        const { rows } = await f.db.owner.raw<{ rows: unknown[] }>(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)
        return rows.length > 0 ? true : undefined
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
})
