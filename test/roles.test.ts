import { expect } from 'chai'
import type { Knex } from 'knex'
import { API_ROLE, WORKER_ROLE } from '../src/db/roles.ts'
import { assertConnectionRole, UnsafeConnectionError } from '../src/db/connection-guard.ts'
import { createKnex } from '../src/db/knex.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

describe('database roles', () => {
  let db: TestDatabase
  let api: Knex
  let worker: Knex
  let messageId: string
  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    worker = createKnex(db.workerUrl, { applicationName: 'test-worker' })
    messageId = await insertOpenMessage(db.owner)
  })
  after(async () => {
    await Promise.all([api.destroy(), worker.destroy()])
    await db.drop()
  })

  const sqlstate = (promise: Promise<unknown>) =>
    promise.then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  it('lets web and worker start on their own roles and refuses the owner', async () => {
    await assertConnectionRole(api, API_ROLE, 'API_DATABASE_URL')
    await assertConnectionRole(worker, WORKER_ROLE, 'WORKER_DATABASE_URL')
    const refused = await assertConnectionRole(db.owner, API_ROLE, 'API_DATABASE_URL').then(
      () => undefined,
      (error: Error) => error,
    )
    expect(refused).to.be.instanceOf(UnsafeConnectionError)
    expect(refused?.message).to.include('API_DATABASE_URL')
    const crossed = await assertConnectionRole(api, WORKER_ROLE, 'WORKER_DATABASE_URL').then(
      () => undefined,
      (error: Error) => error,
    )
    expect(crossed).to.be.instanceOf(UnsafeConnectionError)
  })

  it('keeps ciphertexts and outbox state out of the api role’s reach', async () => {
    expect(await sqlstate(api('outbox.security_outbox_ciphertexts').select('envelope'))).to.equal('42501')
    expect(await sqlstate(api('outbox.security_outbox_messages').where({ id: messageId }).update({ state: 'dead_lettered' }))).to.equal(
      '42501',
    )
    expect(await sqlstate(api('pgboss.job').update({ state: 'completed' }))).to.equal('42501')
    expect(await sqlstate(api('pgboss.job').delete())).to.equal('42501')
  })

  it('keeps identity secrets out of the worker role’s reach', async () => {
    expect(await sqlstate(worker('identity.password_credentials').select('password_hash'))).to.equal('42501')
    expect(await sqlstate(worker('identity.challenges').select('code_hash'))).to.equal('42501')
    expect(await sqlstate(worker('identity.challenges').select('expires_at'))).to.equal('allowed')
    expect(await sqlstate(worker('outbox.security_outbox_ciphertexts').select('envelope'))).to.equal('allowed')
  })

  it('lets only the api role close a challenge’s messages, and only for the reasons that are the web’s', async () => {
    const challengeId = (await db.owner('outbox.security_outbox_messages').where({ id: messageId }).first()).challenge_id
    expect(await sqlstate(worker.raw('SELECT outbox.dead_letter_open_messages(?, ?)', [challengeId, 'superseded_by_resend']))).to.equal(
      '42501',
    )
    expect(await sqlstate(api.raw('SELECT outbox.dead_letter_open_messages(?, ?)', [challengeId, 'provider_rejected']))).to.equal('42501')
    expect(await sqlstate(api.raw('SELECT outbox.dead_letter_open_messages(?, ?)', [challengeId, 'superseded_by_resend']))).to.equal(
      'allowed',
    )
    expect(await db.owner('outbox.security_outbox_dead_letters').where({ message_id: messageId }).first()).to.include({
      reason: 'superseded_by_resend',
    })
  })

  it('lets neither role run DDL', async () => {
    expect(await sqlstate(api.raw('CREATE TABLE outbox.sneaky (id int)'))).to.equal('42501')
    expect(await sqlstate(worker.raw('DROP TABLE outbox.security_outbox_attempts'))).to.equal('42501')
  })
})
