import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { requestPasswordRecoveryTx, type ChallengeDeps } from '../src/identity/password-recovery.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'

/** Round trips of the enqueue path (bench/README.md "What bounds each target"), and equal work for known and unknown. */
describe('round trips of a password-recovery request', () => {
  let db: TestDatabase
  let api: Knex
  let boss: PgBoss
  const keys = testKeys()
  const logs = capturingLogger()
  const deps = (): ChallengeDeps => ({
    boss,
    outboxKey: keys.outboxKey,
    codeHashKey: keys.codeHashKey,
    challengeTtlSeconds: 600,
    clock: () => new Date(),
    logger: logs.logger,
    channels: new Set(['email', 'whatsapp']),
  })

  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    boss = createBoss(db.apiUrl, 'web', logs.logger)
    await boss.start()
  })

  after(async () => {
    await boss.stop({ graceful: false })
    await api.destroy()
    await db.drop()
  })

  /** The statements one request sends, literals and identifiers normalised away. */
  const statementsOf = async (email: string): Promise<string[]> => {
    const seen: string[] = []
    const record = (query: { sql: string }) => seen.push(query.sql.replace(/\s+/g, ' ').replace(/"[^"]*"/g, '"…"'))
    api.on('query', record)
    try {
      await api.transaction((trx) => requestPasswordRecoveryTx(trx, deps(), { kind: 'email', value: email }))
    } finally {
      api.off('query', record)
    }
    return seen
  }

  it('runs the same statements for a known and an unknown identifier, in a bounded number of round trips', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(db.owner, known)
    const forKnown = await statementsOf(known)
    const forUnknown = await statementsOf(uniqueEmail('unknown'))
    // The same data statements (savepoints aside: a known identifier's rehearsed claim has its own).
    const data = (statements: string[]) =>
      statements.filter((sql) => !/^(SAVEPOINT|ROLLBACK TO SAVEPOINT|RELEASE SAVEPOINT)/.test(sql)).sort()
    expect(data(forKnown)).to.deep.equal(data(forUnknown))
    // BEGIN, lookup, identity + claim (real or rehearsed), destination lock, expire + count + hit,
    // challenge lock, open challenge, challenge + message + ciphertext, job, COMMIT (was 15:
    // bench/README.md "What bounds each target").
    expect(data(forKnown)).to.have.length(10)
    expect(forKnown.length - forUnknown.length).to.be.at.most(2)
  })
})
