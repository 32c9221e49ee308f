import { expect } from 'chai'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/**
 * Found by review: "every path does the same database work" (docs/architecture.md §7). The rehearsal's
 * rows are rolled back with their subtransaction, and so are the deferred checks they queued:
 * the outbox's constraint triggers (INITIALLY DEFERRED) and pg-boss's deferrable foreign keys
 * from the job to pgboss.queue (each a FOR KEY SHARE lock on the one queue row). A real issue
 * runs them at COMMIT, a rehearsed one never does (and only a real job's NOTIFY survives): work
 * at commit, on shared rows, that only a known identifier costs. pg_stat_statements counts the
 * statements run at commit as top-level ones, so the default track=top sees them.
 */
describe('work at COMMIT of a password recovery, known or unknown', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()

  before(async () => {
    side = await openWebSide(logs.logger)
    await side.db.owner.raw('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  })
  after(() => side.close())

  async function topLevelStatementsOf(email: string): Promise<string[]> {
    await side.db.owner.raw('SELECT pg_stat_statements_reset()')
    await requestPasswordRecovery(side.api, webChallengeDeps(side.boss, keys, logs.logger), { kind: 'email', value: email })
    const { rows } = await side.db.owner.raw<{ rows: { query: string; calls: number }[] }>(
      `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls::int AS calls FROM pg_stat_statements
        WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT LIKE '%pg_stat_statements%' ORDER BY 1`,
    )
    return rows.map((row) => `${row.calls}× ${row.query.slice(0, 100)}`)
  }

  it('runs the same statements at commit for a known and an unknown identifier', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(side.db.owner, known)
    await topLevelStatementsOf(uniqueEmail('warm-up')) // pg-boss's first send reads the server version
    const forKnown = await topLevelStatementsOf(known)
    const forUnknown = await topLevelStatementsOf(uniqueEmail('unknown'))
    expect(forKnown.some((statement) => statement.includes('identity.issue_challenge'))).to.equal(true)
    expect(forUnknown).to.deep.equal(forKnown)
  })

  it('wakes LISTENers of the delivery queue for a known identifier and an unknown one alike', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(side.db.owner, known)
    const listener = await side.db.owner.client.acquireConnection()
    const heard: string[] = []
    let sentinelHeard: () => void = () => undefined
    const onNotification = (message: { channel: string; payload?: string }) =>
      message.channel === 'equal_commit_sentinel' ? sentinelHeard() : heard.push(message.payload ?? '')
    try {
      const { rows } = await listener.query(`SELECT 'pgboss_' || left(encode(sha224('pgboss'::bytea), 'hex'), 24) AS channel`)
      await listener.query(`LISTEN "${(rows as { channel: string }[])[0]!.channel}"`)
      await listener.query('LISTEN equal_commit_sentinel')
      listener.on('notification', onNotification)
      const wakeUpsOf = async (email: string) => {
        heard.length = 0
        await requestPasswordRecovery(side.api, webChallengeDeps(side.boss, keys, logs.logger), { kind: 'email', value: email })
        // Notifications reach a listener in commit order: once this later one is heard, so is any of the request's.
        const sentinel = new Promise<void>((resolve) => (sentinelHeard = resolve))
        await side.db.owner.raw('NOTIFY equal_commit_sentinel')
        await sentinel
        return heard.length
      }
      const forKnown = await wakeUpsOf(known)
      const forUnknown = await wakeUpsOf(uniqueEmail('unknown'))
      expect(forKnown, 'the real job notifies').to.equal(1)
      expect(forUnknown, 'a LISTENer cannot tell the unknown identifier apart').to.equal(forKnown)
    } finally {
      listener.off('notification', onNotification)
      await listener.query('UNLISTEN *')
      await side.db.owner.client.releaseConnection(listener)
    }
  })
})
