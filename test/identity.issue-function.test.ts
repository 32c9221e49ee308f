import { randomBytes, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { QUEUES } from '../src/outbox/constants.ts'
import { sealMessage } from '../src/outbox/enqueue.ts'
import { enqueueMessageTx } from '../src/outbox/web-functions-sql.ts'
import { hitRateLimit } from '../src/identity/rate-limits.ts'
import { RateLimitedError } from '../src/identity/errors.ts'
import { issueHidden } from '../src/identity/challenge-issue.ts'
import { requestPasswordRecovery } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/**
 * The enqueue path's database functions (migration 20261201000800): what they must keep of the
 * TypeScript they replaced, and of pg-boss.
 */
describe('the enqueue path in the database', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()

  before(async () => {
    side = await openWebSide(logs.logger)
  })
  after(() => side.close())

  const message = () => ({
    purpose: 'security_notice' as const,
    channel: 'email' as const,
    destination: 'someone@example.com',
    locale: 'en',
    expiresAt: new Date(Date.now() + 600_000),
  })

  it('inserts the job pg-boss would insert for boss.send, with the message', async () => {
    const deps = { boss: side.boss, outboxKey: keys.outboxKey, codeHashKey: keys.codeHashKey }
    const sealed = await sealMessage(deps, message(), Buffer.from('notice'))
    await side.api.transaction((trx) => enqueueMessageTx(trx, sealed))
    const sentId = randomUUID()
    await side.boss.send(QUEUES.delivery, { messageId: randomUUID() }, { id: sentId })

    const columns = async (id: string) => {
      const row = (await side.db.owner('pgboss.job').where({ id }).first()) as Record<string, unknown>
      // What differs between any two jobs: identity, payload and the moments they were made.
      for (const column of ['id', 'data', 'created_on', 'start_after', 'keep_until', 'singleton_on', 'trace_context']) delete row[column]
      return row
    }
    expect(await columns(sealed.job_id)).to.deep.equal(await columns(sentId))
    const stored = await side.db.owner('outbox.security_outbox_messages').where({ id: sealed.message_id }).first()
    expect(stored.job_id).to.equal(sealed.job_id)
    expect((await side.db.owner('pgboss.job').where({ id: sealed.job_id }).first()).data).to.deep.equal({ messageId: sealed.message_id })
  })

  it('refuses a job that is not the one the message names', async () => {
    const deps = { boss: side.boss, outboxKey: keys.outboxKey, codeHashKey: keys.codeHashKey }
    const sealed = await sealMessage(deps, message(), Buffer.from('notice'))
    const other = randomUUID()
    const job_json = JSON.stringify((JSON.parse(sealed.job_json) as { id: string }[]).map((job) => ({ ...job, id: other })))
    const failure = await side.api
      .transaction((trx) => enqueueMessageTx(trx, { ...sealed, job_json }))
      .then(
        () => undefined,
        (error: { code?: string }) => error.code,
      )
    expect(failure).to.equal('22023')
    expect(await side.db.owner('outbox.security_outbox_messages').where({ id: sealed.message_id })).to.have.length(0)
    expect(await side.db.owner('pgboss.job').where({ id: other })).to.have.length(0)
  })

  it('takes the same advisory locks for a bucket as the web did before (a key’s first 8 bytes, signed)', async () => {
    // Keys whose first byte has its high bit set and not: both signs of the bigint.
    const bucket = [Buffer.concat([Buffer.from([0xff]), randomBytes(31)]), Buffer.concat([Buffer.from([0x01]), randomBytes(31)])]
    const locks = await side.api.transaction(async (trx) => {
      await hitRateLimit(trx, bucket, { max: 5, windowSeconds: 60 }, new Date())
      const { rows } = await trx.raw<{ rows: { classid: number; objid: number }[] }>(
        `SELECT classid::text::bigint AS classid, objid::text::bigint AS objid FROM pg_locks
          WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid() ORDER BY 1, 2`,
      )
      return rows.map((row) => (BigInt(row.classid) << 32n) | BigInt(row.objid))
    })
    const expected = bucket.map((key) => BigInt.asUintN(64, key.readBigInt64BE(0))).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    expect(locks.map(String).sort()).to.deep.equal(expected.map(String).sort())
  })

  it('counts hits under the first key, under every key, and says how long until there is room', async () => {
    const [current, previous] = [randomBytes(32), randomBytes(32)]
    const now = new Date()
    const limit = { max: 2, windowSeconds: 60 }
    await side.api.transaction((trx) => hitRateLimit(trx, [previous], limit, new Date(now.getTime() - 20_000)))
    await side.api.transaction((trx) => hitRateLimit(trx, [current, previous], limit, now))
    const refused = await side.api
      .transaction((trx) => hitRateLimit(trx, [current, previous], limit, now))
      .then(
        () => undefined,
        (error: unknown) => error,
      )
    expect(refused).to.be.instanceOf(RateLimitedError)
    // The oldest hit (20 s ago) leaves the 60 s window in 40 s.
    expect((refused as RateLimitedError).retryAfterSeconds).to.equal(40)
    const rows = await side.db.owner('platform.rate_limit_hits').whereIn('bucket_key', [current, previous]).select('bucket_key')
    expect(rows.filter((row: { bucket_key: Buffer }) => row.bucket_key.equals(current))).to.have.length(1)
  })

  it('refuses a resend as too soon when the open challenge under the lock is not the one read before (a concurrent request opened it)', async () => {
    const email = uniqueEmail('raced')
    const { identityId, loginIdentifierId } = await createVerifiedIdentity(side.db.owner, email)
    let now = new Date()
    const deps = webChallengeDeps(side.boss, keys, logs.logger, { clock: () => now })
    await requestPasswordRecovery(side.api, deps, { kind: 'email', value: email })
    const before = await side.db.owner('identity.challenges').where({ identity_id: identityId }).first()
    now = new Date(now.getTime() + 31_000)
    // A resend whose code hash was bound to another challenge id than the one now open.
    await issueHidden(
      side.api,
      deps,
      'password recovery',
      {
        purpose: 'password_recovery',
        identifier: { kind: 'email', value: email },
        asked: 'owner',
        subject: { identityId, loginIdentifierId },
        openChallengeId: randomUUID(),
      },
      { now, claim: 'rehearse' },
    )
    const after = await side.db.owner('identity.challenges').where({ identity_id: identityId }).first()
    expect(after.resend_count).to.equal(0)
    expect(Buffer.compare(after.code_hash, before.code_hash)).to.equal(0)
    expect(logs.text()).to.include('"message":"password recovery not enqueued"').and.to.include('"errorCode":"resend_too_soon"')
  })
})
