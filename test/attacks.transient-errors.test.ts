import { expect } from 'chai'
import type { Knex } from 'knex'
import { testCluster } from './support/root-hooks.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, eventually, testKeys, uniqueEmail } from './support/helpers.ts'
import { startWebStack } from './support/web-stack.ts'

/**
 * "a sign-up was answered 202 with nothing enqueued". A transient database error in
 * the enqueue of a hidden path (here: the web's insert of the message waits on a lock another
 * connection holds, and its role's `lock_timeout` ends the wait with 55P03, as a deadlock ends
 * with 40P01) must be retried in a new transaction or answered 503 with Retry-After, never
 * swallowed behind the accepted answer — and the same way whether or not the address has an account.
 */
describe('a transient database error on a hidden path is never hidden behind a 202', () => {
  let db: TestDatabase
  let stack: Awaited<ReturnType<typeof startWebStack>>
  const keys = testKeys()
  const logs = capturingLogger()
  let apiLogin: string

  before(async () => {
    apiLogin = testCluster().logins.api.user
    db = await createTestDatabase()
    // Only the web's new connections in this database wait at most 200 ms for a lock.
    await db.owner.raw(`ALTER ROLE ?? IN DATABASE ?? SET lock_timeout = '200ms'`, [apiLogin, db.name])
    stack = await startWebStack(db, { keys, logger: logs.logger, worker: false })
  })
  after(async () => {
    await stack?.stop()
    await db?.owner.raw(`ALTER ROLE ?? IN DATABASE ?? RESET lock_timeout`, [apiLogin, db.name])
    await db?.drop()
  })

  /** Another connection holds a lock every enqueue needs (inserts into the messages table wait), until released. */
  async function holdEnqueueLock(): Promise<{ release: () => Promise<void> }> {
    const holder: Knex.Transaction = await db.owner.transaction()
    await holder.raw('LOCK TABLE outbox.security_outbox_messages IN SHARE MODE')
    let released = false
    return {
      release: async () => {
        if (released) return
        released = true
        await holder.rollback()
      },
    }
  }

  /** Web connections waiting for a lock right now. */
  async function webLockWaits(): Promise<number> {
    const { rows } = await db.owner.raw<{ rows: { waits: number }[] }>(
      `SELECT count(*)::int AS waits FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE NOT l.granted AND a.usename = ? AND a.datname = ?`,
      [apiLogin, db.name],
    )
    return rows[0]!.waits
  }

  /** Polls until `probe` holds (test/support/helpers.ts `eventually`). */
  const until = (probe: () => Promise<boolean>, what: string) => eventually(async () => ((await probe()) ? true : undefined), what)

  const messagesTo = async (address: string) =>
    Number((await db.owner('outbox.security_outbox_messages').where({ destination: address }).count({ n: '*' }))[0]!.n)
  const challengesOf = async (identityId: string) =>
    Number((await db.owner('identity.challenges').where({ identity_id: identityId }).count({ n: '*' }))[0]!.n)

  it('a sign-up for an existing address whose enqueue cannot get its lock is answered 503 with Retry-After, not 202 with nothing sent', async () => {
    const owner = uniqueEmail('owner')
    const { identityId } = await createVerifiedIdentity(db.owner, owner)
    const lock = await holdEnqueueLock()
    let answer: Awaited<ReturnType<typeof stack.call>>
    try {
      answer = await stack.call('POST', '/sign-ups', { identifier: owner, password: 'a long enough password 1' })
    } finally {
      await lock.release()
    }
    expect(answer.status, 'a 202 promises a message; none was committed').to.equal(503)
    expect(answer.headers.get('content-type')).to.match(/^application\/problem\+json/)
    expect(answer.headers.get('retry-after')).to.match(/^\d+$/)
    expect(await messagesTo(owner), 'nothing half-written').to.equal(0)
    expect(await challengesOf(identityId)).to.equal(0)
  })

  it('a password recovery answers a blocked enqueue alike for a known and an unknown identifier: 503 with Retry-After, the same body', async () => {
    const known = uniqueEmail('known')
    await createVerifiedIdentity(db.owner, known)
    const unknown = uniqueEmail('unknown')
    const answers = []
    for (const address of [known, unknown]) {
      const lock = await holdEnqueueLock()
      try {
        answers.push(await stack.call('POST', '/password-recoveries', { identifier: address }))
      } finally {
        await lock.release()
      }
    }
    const [forKnown, forUnknown] = answers
    expect(forKnown!.status, 'the known identifier: no message committed, so no 202').to.equal(503)
    expect(forUnknown!.status, 'the unknown identifier: the same answer').to.equal(forKnown!.status)
    expect(forUnknown!.body).to.deep.equal(forKnown!.body)
    expect(forUnknown!.headers.get('retry-after')).to.equal(forKnown!.headers.get('retry-after'))
    expect(await messagesTo(known)).to.equal(0)
  })

  it('a recovery whose first attempt times out on the lock is retried in a new transaction: 202 with exactly one message committed', async () => {
    const known = uniqueEmail('retried')
    const { identityId } = await createVerifiedIdentity(db.owner, known)
    const lock = await holdEnqueueLock()
    let answering: Promise<Awaited<ReturnType<typeof stack.call>>> | undefined
    try {
      answering = stack.call('POST', '/password-recoveries', { identifier: known })
      await until(async () => (await webLockWaits()) > 0, 'the enqueue to wait on the lock')
      await until(async () => (await webLockWaits()) === 0, 'its lock_timeout')
    } finally {
      await lock.release()
    }
    const answer = await answering
    expect(answer.status).to.equal(202)
    expect(await messagesTo(known), 'the 202 has its message').to.equal(1)
    expect(await challengesOf(identityId)).to.equal(1)
  })
})
