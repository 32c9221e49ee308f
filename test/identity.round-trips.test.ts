import { expect } from 'chai'
import { requestPasswordRecoveryTx, type ChallengeDeps } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/** Round trips of the enqueue path (bench/README.md "What bounds each target"), and equal work for known and unknown. */
describe('round trips of a password-recovery request', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()
  const deps = (extra: Partial<ChallengeDeps> = {}): ChallengeDeps => webChallengeDeps(side.boss, keys, logs.logger, extra)

  before(async () => {
    side = await openWebSide(logs.logger)
  })
  after(() => side.close())

  /** The statements one request sends, literals and identifiers normalised away. */
  const statementsOf = async (email: string): Promise<string[]> => {
    const seen: string[] = []
    const record = (query: { sql: string }) => seen.push(query.sql.replace(/\s+/g, ' ').replace(/"[^"]*"/g, '"…"'))
    side.api.on('query', record)
    try {
      await side.api.transaction((trx) => requestPasswordRecoveryTx(trx, deps(), { kind: 'email', value: email }))
    } finally {
      side.api.off('query', record)
    }
    return seen
  }

  it('runs the same statements for a known and an unknown identifier, in a bounded number of round trips', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(side.db.owner, known)
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
