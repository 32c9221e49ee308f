import { expect } from 'chai'
import type { Knex } from 'knex'
import { randomBytes } from 'node:crypto'
import { uuidv7 } from 'uuidv7'
import { createKnex } from '../src/db/knex.ts'
import { deleteFinishedBefore } from '../src/outbox/maintenance-sql.ts'
import { deadLetterMessagesTx } from '../src/outbox/messages-sql.ts'
import { deadLetterChallengeMessagesTx, deadLetterInvitationMessagesTx } from '../src/outbox/web-functions-sql.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { createVerifiedIdentity, insertOpenMessage, uniqueEmail } from './support/helpers.ts'

/** What dead-lettering leaves behind for one message, without its id. */
async function aftermath(owner: Knex, messageId: string) {
  const message = await owner('outbox.security_outbox_messages')
    .where({ id: messageId })
    .first('state', 'dead_lettered_at', 'attempt_count', 'lease_job_id', 'lease_retry_count', 'leased_at')
  const letter = await owner('outbox.security_outbox_dead_letters')
    .where({ message_id: messageId })
    .first('reason', 'last_failure_class', 'dead_lettered_at')
  const ciphertexts = await owner('outbox.security_outbox_ciphertexts').where({ message_id: messageId }).count<{ count: string }[]>()
  return { message, letter, ciphertexts: Number(ciphertexts[0]!.count) }
}

async function insertInvitationMessage(owner: Knex): Promise<{ invitationId: string; messageId: string }> {
  const { identityId } = await createVerifiedIdentity(owner, uniqueEmail('inviter'))
  const organizationId = uuidv7()
  await owner('organization.organizations').insert({ id: organizationId, name: 'Acme', created_by: identityId })
  const invitationId = uuidv7()
  await owner('organization.invitations').insert({
    id: invitationId,
    organization_id: organizationId,
    email: uniqueEmail('invitee'),
    token_hash: randomBytes(32),
    invited_by: identityId,
    expires_at: new Date(Date.now() + 600_000),
  })
  const messageId = await insertOpenMessage(owner, { purpose: 'invitation', challenge_id: null, invitation_id: invitationId })
  return { invitationId, messageId }
}

const challengeOf = async (owner: Knex, messageId: string): Promise<string> =>
  (await owner('outbox.security_outbox_messages').where({ id: messageId }).first('challenge_id')).challenge_id

describe('one dead-letter implementation (outbox.dead_letter_messages)', () => {
  let db: TestDatabase
  let api: Knex
  let worker: Knex
  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    worker = createKnex(db.workerUrl, { applicationName: 'test-worker' })
  })
  after(async () => {
    await Promise.all([api.destroy(), worker.destroy()])
    await db.drop()
  })

  it('leaves identical rows whether the worker or the web’s functions dead-letter, stamped with the clock passed in', async () => {
    // A clock 3 minutes from the database's own (inside the skew the web's functions allow), so a
    // now() anywhere on the way would show.
    const now = new Date(Date.now() + 180_000)
    const [byWorker, byChallenge] = [await insertOpenMessage(db.owner), await insertOpenMessage(db.owner)]
    const { invitationId, messageId: byInvitation } = await insertInvitationMessage(db.owner)

    await worker.transaction((trx) =>
      deadLetterMessagesTx(trx, [{ messageId: byWorker, reason: 'superseded_by_resend', lastFailureClass: null }], now),
    )
    const challengeId = await challengeOf(db.owner, byChallenge)
    await api.transaction((trx) => deadLetterChallengeMessagesTx(trx, challengeId, 'superseded_by_resend', now))
    await api.transaction((trx) => deadLetterInvitationMessagesTx(trx, invitationId, 'invitation_revoked', now))

    const expected = {
      message: {
        state: 'dead_lettered',
        dead_lettered_at: now,
        attempt_count: 0,
        lease_job_id: null,
        lease_retry_count: null,
        leased_at: null,
      },
      letter: { reason: 'superseded_by_resend', last_failure_class: null, dead_lettered_at: now },
      ciphertexts: 0,
    }
    expect(await aftermath(db.owner, byWorker)).to.deep.equal(expected)
    expect(await aftermath(db.owner, byChallenge)).to.deep.equal(expected)
    expect(await aftermath(db.owner, byInvitation)).to.deep.equal({
      ...expected,
      letter: { ...expected.letter, reason: 'invitation_revoked' },
    })
  })

  it('holds the web’s clock within 5 minutes of the database’s: a compromised web cannot back-date a dead letter into retention or post-date it past it', async () => {
    const stamps: Date[] = []
    for (const claimed of [new Date(0), new Date('9999-01-01T00:00:00Z')]) {
      const messageId = await insertOpenMessage(db.owner)
      const challengeId = await challengeOf(db.owner, messageId)
      const before = Date.now()
      await api.transaction((trx) => deadLetterChallengeMessagesTx(trx, challengeId, 'superseded_by_resend', claimed))
      const after = Date.now()
      const { message, letter } = await aftermath(db.owner, messageId)
      expect(message!.dead_lettered_at.getTime()).to.equal(letter!.dead_lettered_at.getTime())
      const stamp = letter!.dead_lettered_at.getTime()
      const skew = claimed.getTime() < before ? -300_000 : 300_000
      expect(stamp).to.be.within(before + skew - 1_000, after + skew + 1_000)
      stamps.push(letter!.dead_lettered_at)
      // The day's retention sweep (dead letters are kept 90 days) leaves the back-dated one alone.
      await deleteFinishedBefore(worker, 'dead_lettered', new Date(Date.now() - 90 * 86_400_000), 100)
      expect(await db.owner('outbox.security_outbox_messages').where({ id: messageId }).first('id')).to.not.equal(undefined)
    }
    expect(stamps).to.have.length(2)
  })

  it('closes only open messages: the web’s function skips a final one, the worker’s path refuses it', async () => {
    const now = new Date('2031-05-06T07:08:09.123Z')
    const messageId = await insertOpenMessage(db.owner)
    const challengeId = await challengeOf(db.owner, messageId)
    const first = await api.transaction((trx) =>
      trx.raw('SELECT outbox.dead_letter_open_messages(?, ?, ?) AS n', [challengeId, 'challenge_consumed', now]),
    )
    const again = await api.transaction((trx) =>
      trx.raw('SELECT outbox.dead_letter_open_messages(?, ?, ?) AS n', [challengeId, 'challenge_consumed', now]),
    )
    expect([first.rows[0].n, again.rows[0].n]).to.deep.equal([1, 0])

    const refused = await worker
      .transaction((trx) => deadLetterMessagesTx(trx, [{ messageId, reason: 'challenge_expired', lastFailureClass: null }], now))
      .then(
        () => undefined,
        (error: Error) => error.message,
      )
    expect(refused).to.equal('dead-lettered 0 of 1 messages: the others were not open')
    expect((await aftermath(db.owner, messageId)).letter).to.deep.include({ reason: 'challenge_consumed' })
  })

  it('counts the attempt just made and keeps the last failure class when the worker dead-letters after one', async () => {
    const now = new Date('2031-05-06T07:08:09.123Z')
    const messageId = await insertOpenMessage(db.owner, { state: 'leased', lease_job_id: uuidv7(), lease_retry_count: 0, leased_at: now })
    await worker.transaction(async (trx) => {
      await trx('outbox.security_outbox_attempts').insert({
        message_id: messageId,
        attempt_no: 1,
        outcome: 'failed',
        failure_class: 'REJECTED',
        duration_ms: 1,
        attempted_at: now,
      })
      await deadLetterMessagesTx(trx, [{ messageId, reason: 'provider_rejected', lastFailureClass: 'REJECTED', attempted: true }], now)
    })
    const { message, letter } = await aftermath(db.owner, messageId)
    expect(message).to.include({ state: 'dead_lettered', attempt_count: 1 })
    expect(letter).to.deep.equal({ reason: 'provider_rejected', last_failure_class: 'REJECTED', dead_lettered_at: now })
  })

  it('is the worker’s to call, not the web’s; the web keeps its two functions and their reasons', async () => {
    const messageId = await insertOpenMessage(db.owner)
    const challengeId = await challengeOf(db.owner, messageId)
    const call = 'SELECT outbox.dead_letter_messages(?::uuid[], ?::text[], ?::text[], ?::boolean[], ?)'
    const args = [[messageId], ['provider_rejected'], ['REJECTED'], [false], new Date()]
    const sqlstate = (promise: Promise<unknown>) =>
      promise.then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      )
    expect(await sqlstate(api.raw(call, args))).to.equal('42501')
    expect(
      await sqlstate(worker.raw('SELECT outbox.dead_letter_open_messages(?, ?, ?)', [challengeId, 'challenge_consumed', new Date()])),
    ).to.equal('42501')
    expect(
      await sqlstate(api.raw('SELECT outbox.dead_letter_open_messages(?, ?, ?)', [challengeId, 'provider_rejected', new Date()])),
    ).to.equal('42501')
    expect((await aftermath(db.owner, messageId)).message).to.include({ state: 'pending' })
  })
})
