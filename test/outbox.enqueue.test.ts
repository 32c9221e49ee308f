import { expect } from 'chai'
import type { Knex } from 'knex'
import type { PgBoss } from 'pg-boss'
import { envelopeContext, open } from '../src/crypto/envelope.ts'
import { createBoss } from '../src/db/boss.ts'
import { createKnex } from '../src/db/knex.ts'
import { requestPasswordRecoveryTx, type ChallengeDeps } from '../src/identity/password-recovery.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail, columnsContaining } from './support/helpers.ts'

/** The web side alone (no worker), so enqueued rows stay exactly as the commit left them. */
describe('enqueue of a password-recovery code', () => {
  let db: TestDatabase
  let api: Knex
  let boss: PgBoss
  const keys = testKeys()
  const logs = capturingLogger()
  const deps = (extra: Partial<ChallengeDeps> = {}): ChallengeDeps => ({
    boss,
    outboxKey: keys.outboxKey,
    codeHashKey: keys.codeHashKey,
    challengeTtlSeconds: 600,
    clock: () => new Date(),
    logger: logs.logger,
    channels: new Set(['email', 'whatsapp']),
    ...extra,
  })
  const counts = async () => ({
    challenges: Number((await db.owner('identity.challenges').count({ n: '*' }))[0]!.n),
    messages: Number((await db.owner('outbox.security_outbox_messages').count({ n: '*' }))[0]!.n),
    ciphertexts: Number((await db.owner('outbox.security_outbox_ciphertexts').count({ n: '*' }))[0]!.n),
    jobs: Number((await db.owner('pgboss.job').where({ name: 'security-outbox' }).count({ n: '*' }))[0]!.n),
  })
  const NOTHING = { challenges: 0, messages: 0, ciphertexts: 0, jobs: 0 }

  beforeEach(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    boss = createBoss(db.apiUrl, 'web', logs.logger)
    await boss.start()
  })

  afterEach(async () => {
    await boss.stop({ graceful: false })
    await api.destroy()
    await db.drop()
  })

  it('writes challenge, message, ciphertext and job in the one transaction it is given', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(db.owner, email)
    await api.transaction((trx) => requestPasswordRecoveryTx(trx, deps(), { kind: 'email', value: email }))
    expect(await counts()).to.deep.equal({ challenges: 1, messages: 1, ciphertexts: 1, jobs: 1 })
  })

  it('leaves nothing behind when the caller’s transaction fails after the enqueue', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(db.owner, email)
    const failure = await api
      .transaction(async (trx) => {
        await requestPasswordRecoveryTx(trx, deps(), { kind: 'email', value: email })
        throw new Error('a later step of the request failed')
      })
      .then(
        () => undefined,
        (error: Error) => error,
      )
    expect(failure?.message).to.equal('a later step of the request failed')
    expect(await counts()).to.deep.equal(NOTHING)
  })

  it('rolls back all four writes when a step after the outbox insert fails, and still answers like an unknown identifier', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(db.owner, email)
    const failing = deps({
      afterEnqueueTx: async () => {
        throw Object.assign(new Error(`step failed for ${email}`), { code: 'XX001' })
      },
    })
    const result = await api.transaction((trx) => requestPasswordRecoveryTx(trx, failing, { kind: 'email', value: email }))
    expect(result.challengeExpiresAt).to.be.instanceOf(Date)
    expect(await counts()).to.deep.equal(NOTHING)
    expect(logs.text()).to.include('"message":"password recovery not enqueued"').and.to.include('"errorCode":"XX001"')
    expect(logs.text()).not.to.include(email)
  })

  it('keeps no plaintext code at rest: not in any column of any table, not in the job', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(db.owner, email)
    await api.transaction((trx) => requestPasswordRecoveryTx(trx, deps(), { kind: 'email', value: email }))

    const message = await db.owner('outbox.security_outbox_messages').first()
    const { envelope } = await db.owner('outbox.security_outbox_ciphertexts').where({ message_id: message.id }).first()
    const code = open(
      keys.outboxKey,
      envelope,
      envelopeContext(message.id, message.purpose, message.channel, message.destination),
    ).toString('utf8')
    expect(code).to.match(/^\d{6}$/)

    const hits = await columnsContaining(db.owner, code)
    expect(hits, 'columns holding the plaintext code').to.deep.equal([])

    const job = await db.owner('pgboss.job').where({ name: 'security-outbox' }).first()
    expect(job.data).to.deep.equal({ messageId: message.id })
  })
})
