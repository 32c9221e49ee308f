import { expect } from 'chai'
import type { Knex } from 'knex'
import { fromKnex, type PgBoss } from 'pg-boss'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger } from './support/helpers.ts'

/**
 * Measured: `boss.send(…, { db })` needs SELECT on pgboss.version (start),
 * pgboss.queue (the insert joins it) and job (id, start_after) (RETURNING); nothing else.
 */
describe("the web's pg-boss privileges", () => {
  let db: TestDatabase
  let api: Knex
  let boss: PgBoss
  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    boss = createBoss(db.apiUrl, 'web', capturingLogger().logger)
    await boss.start()
  })
  after(async () => {
    await boss.stop({ graceful: false })
    await api.destroy()
    await db.drop()
  })
  const sqlstate = (promise: Promise<unknown>) =>
    promise.then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  it('are enough for a transactional send', async () => {
    const id = await api.transaction((trx) =>
      boss.send(QUEUES.delivery, { messageId: '00000000-0000-7000-8000-000000000000' }, { db: fromKnex(trx) }),
    )
    expect(id).to.be.a('string')
  })

  it('read no job data and no other pg-boss table', async () => {
    expect(await sqlstate(api.raw('SELECT data FROM pgboss.job LIMIT 1'))).to.equal('42501')
    expect(await sqlstate(api.raw('SELECT output FROM pgboss.job LIMIT 1'))).to.equal('42501')
    const others: { tablename: string }[] = (
      await db.owner.raw(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'pgboss' AND tablename NOT IN ('version', 'queue') AND tablename NOT LIKE 'j%'",
      )
    ).rows
    expect(others.length).to.be.greaterThan(0)
    for (const { tablename } of others)
      expect(await sqlstate(api.raw(`SELECT 1 FROM pgboss.${tablename} LIMIT 1`)), tablename).to.equal('42501')
  })
})
