import { expect } from 'chai'
import { down, up } from '../migrations/20261201000350_envelope_v2.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

describe('migration 20261201000350_envelope_v2', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })
  const sqlstate = (promise: Promise<unknown>) =>
    promise.then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  it('accepts v1 and v2 envelopes and nothing else; its down restores v1 only, and up runs again', async () => {
    const messageId = await insertOpenMessage(db.owner)
    const envelope = (text: string) =>
      db.owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).update({ envelope: text })
    expect(await sqlstate(envelope('v2.k1.a.b.c.d'))).to.equal('allowed')
    expect(await sqlstate(envelope('v3.k1.a.b.c.d'))).to.equal('23514')
    await envelope('v1.a.b.c.d')
    await down(db.owner)
    expect(await sqlstate(envelope('v2.k1.a.b.c.d'))).to.equal('23514')
    await up(db.owner)
    expect(await sqlstate(envelope('v2.k1.a.b.c.d'))).to.equal('allowed')
  })
})
