import { randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { envelopeContext, open } from '../src/crypto/envelope.ts'
import { requestPasswordRecovery, type ChallengeDeps } from '../src/identity/password-recovery.ts'
import { capturingLogger, createVerifiedIdentity, testKeys, uniqueEmail, columnsContaining } from './support/helpers.ts'
import { openWebSide, webChallengeDeps, type WebSide } from './support/web-side.ts'

/** The web side alone (no worker), so enqueued rows stay exactly as the commit left them. */
describe('enqueue of a password-recovery code', () => {
  let side: WebSide
  const keys = testKeys()
  const logs = capturingLogger()
  const deps = (extra: Partial<ChallengeDeps> = {}): ChallengeDeps => webChallengeDeps(side.boss, keys, logs.logger, extra)
  const counts = async () => ({
    challenges: Number((await side.db.owner('identity.challenges').count({ n: '*' }))[0]!.n),
    messages: Number((await side.db.owner('outbox.security_outbox_messages').count({ n: '*' }))[0]!.n),
    ciphertexts: Number((await side.db.owner('outbox.security_outbox_ciphertexts').count({ n: '*' }))[0]!.n),
    jobs: Number((await side.db.owner('pgboss.job').where({ name: 'security-outbox' }).count({ n: '*' }))[0]!.n),
  })
  const NOTHING = { challenges: 0, messages: 0, ciphertexts: 0, jobs: 0 }

  beforeEach(async () => {
    side = await openWebSide(logs.logger)
  })
  afterEach(() => side.close())

  it('writes challenge, message, ciphertext and job in the one transaction it is given', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(side.db.owner, email)
    await side.api.transaction((trx) => requestPasswordRecovery(trx, deps(), { kind: 'email', value: email }))
    expect(await counts()).to.deep.equal({ challenges: 1, messages: 1, ciphertexts: 1, jobs: 1 })
  })

  it('leaves nothing behind when the caller’s transaction fails after the enqueue', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(side.db.owner, email)
    const failure = await side.api
      .transaction(async (trx) => {
        await requestPasswordRecovery(trx, deps(), { kind: 'email', value: email })
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
    await createVerifiedIdentity(side.db.owner, email)
    // A failure the database raises after the message row is written, inside the same call.
    await side.db.owner.raw(`
      CREATE FUNCTION outbox.test_fail_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'step failed' USING ERRCODE = 'XX001'; END $$;
      CREATE TRIGGER test_fail_after_insert AFTER INSERT ON outbox.security_outbox_messages
        FOR EACH ROW EXECUTE FUNCTION outbox.test_fail_after_insert();`)
    try {
      const result = await side.api.transaction((trx) => requestPasswordRecovery(trx, deps(), { kind: 'email', value: email }))
      expect(result.challengeExpiresAt).to.be.instanceOf(Date)
    } finally {
      await side.db.owner.raw(`
        DROP TRIGGER test_fail_after_insert ON outbox.security_outbox_messages;
        DROP FUNCTION outbox.test_fail_after_insert();`)
    }
    expect(await counts()).to.deep.equal(NOTHING)
    expect(logs.text()).to.include('"message":"password recovery not enqueued"').and.to.include('"errorCode":"XX001"')
    expect(logs.text()).not.to.include(email)
  })

  it('commits challenge, message, ciphertext and job in its own one statement when given no transaction, or none of them', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(side.db.owner, email)
    await requestPasswordRecovery(side.api, deps(), { kind: 'email', value: email })
    expect(await counts()).to.deep.equal({ challenges: 1, messages: 1, ciphertexts: 1, jobs: 1 })

    // A job insert that fails (pg-boss handed over a job other than the message's) after the
    // challenge, message and ciphertext were written in the same call: none of them stays.
    const other = uniqueEmail()
    await createVerifiedIdentity(side.db.owner, other)
    const boss = new Proxy(side.boss, {
      get: (target, property, receiver) =>
        property === 'send'
          ? (name: string, data: object, options: { id: string }) => target.send(name, data, { ...options, id: randomUUID() })
          : Reflect.get(target, property, receiver),
    })
    const result = await requestPasswordRecovery(side.api, deps({ boss }), { kind: 'email', value: other })
    expect(result.challengeExpiresAt).to.be.instanceOf(Date)
    expect(await counts()).to.deep.equal({ challenges: 1, messages: 1, ciphertexts: 1, jobs: 1 })
    expect(logs.text()).to.include('"message":"password recovery not enqueued"').and.to.include('"errorCode":"22023"')
  })

  it('keeps no plaintext code at rest: not in any column of any table, not in the job', async () => {
    const email = uniqueEmail()
    await createVerifiedIdentity(side.db.owner, email)
    await side.api.transaction((trx) => requestPasswordRecovery(trx, deps(), { kind: 'email', value: email }))

    const message = await side.db.owner('outbox.security_outbox_messages').first()
    const { envelope } = await side.db.owner('outbox.security_outbox_ciphertexts').where({ message_id: message.id }).first()
    const code = open(
      keys.outboxKey,
      envelope,
      envelopeContext(message.id, message.purpose, message.channel, message.destination),
    ).toString('utf8')
    expect(code).to.match(/^\d{6}$/)

    const hits = await columnsContaining(side.db.owner, code)
    expect(hits, 'columns holding the plaintext code').to.deep.equal([])

    const job = await side.db.owner('pgboss.job').where({ name: 'security-outbox' }).first()
    expect(job.data).to.deep.equal({ messageId: message.id })
  })
})
