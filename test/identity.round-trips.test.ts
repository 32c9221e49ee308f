import { expect } from 'chai'
import { requestPasswordRecovery, type ChallengeDeps } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/** Round trips of the enqueue path (bench/HISTORY.md "The enqueue round"), and equal work for known and unknown. */
describe('round trips of a password-recovery request', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()
  let now = new Date()
  const deps = (extra: Partial<ChallengeDeps> = {}): ChallengeDeps =>
    webChallengeDeps(side.boss, keys, logs.logger, { clock: () => now, ...extra })

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
      await requestPasswordRecovery(side.api, deps(), { kind: 'email', value: email })
    } finally {
      side.api.off('query', record)
    }
    return seen
  }

  it('runs the same statements for a known and an unknown identifier, in two round trips', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(side.db.owner, known)
    const forKnown = await statementsOf(known)
    const forUnknown = await statementsOf(uniqueEmail('unknown'))
    expect(forKnown).to.deep.equal(forUnknown)
    // The lookup (with the open challenge's id), then identity.issue_challenge, its own transaction
    // (was 14 and 12 in a transaction of the route's: bench/HISTORY.md "The enqueue round").
    expect(forKnown).to.have.length(2)
    expect(forKnown.filter((sql) => sql.includes('identity.issue_challenge'))).to.have.length(1)
  })

  it('runs the same statements on the request after 30 s, a resend for a known identifier (found by review)', async () => {
    const [known, unknown] = [uniqueEmail('known'), uniqueEmail('unknown')]
    await createVerifiedIdentity(side.db.owner, known)
    now = new Date()
    await statementsOf(known)
    await statementsOf(unknown)
    now = new Date(now.getTime() + 31_000)
    const forKnown = await statementsOf(known)
    const forUnknown = await statementsOf(unknown)
    expect(forKnown).to.deep.equal(forUnknown)
    // The resend was real: the known identifier's challenge has a second code.
    const [challenge] = await side.db
      .owner('identity.challenges as c')
      .join('identity.login_identifiers as l', 'l.id', 'c.login_identifier_id')
      .where('l.value', known)
      .select('c.resend_count')
    expect(challenge?.resend_count).to.equal(1)
  })
})
