import { randomBytes } from 'node:crypto'
import { expect } from 'chai'
import { uuidv7 } from 'uuidv7'
import { MIGRATION_CONFIG } from '../src/db/migrations.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

const MIGRATION = '20261202000300_exact_suppression'

describe('upgrading to exact suppression (migration 20261202000300)', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })

  /** A suppression as the previous release wrote it: keyed on a canonical mailbox's HMAC. */
  const legacySuppression = async (channel: 'email' | 'whatsapp', messageId: string | null) => {
    const id = uuidv7()
    await db.owner('outbox.suppressed_destinations').insert({
      id,
      destination_hmac: randomBytes(32),
      channel,
      masked_destination: 'x•••y@e•••.com',
      reason: 'permanent_bounce',
      since: new Date(),
      message_id: messageId,
    })
    return id
  }

  it('keeps an old suppression whose message went to the mailbox as written, and lifts (audited) the ones that silenced a mailbox nothing proved', async () => {
    await db.owner.migrate.down({ ...MIGRATION_CONFIG, name: MIGRATION })
    const kept = await legacySuppression('email', await insertOpenMessage(db.owner, { destination: 'bob@example.com' }))
    const phone = await legacySuppression('whatsapp', null)
    const lifted = [
      await legacySuppression('email', await insertOpenMessage(db.owner, { destination: 'carol+shop@example.com' })),
      await legacySuppression('email', await insertOpenMessage(db.owner, { destination: 'd.ave@gmail.com' })),
      await legacySuppression('email', await insertOpenMessage(db.owner, { destination: 'erin@googlemail.com' })),
      await legacySuppression('email', null),
    ]

    await db.owner.migrate.latest(MIGRATION_CONFIG)

    const left = await db.owner('outbox.suppressed_destinations').pluck('id')
    expect(left.sort()).to.deep.equal([kept, phone].sort())
    const audited = await db.owner('platform.audit_records').where({ actor: 'migration:20261202000300' })
    expect(audited.map((record) => record.subject).sort()).to.deep.equal([...lifted].sort())
    expect(audited[0]).to.include({ action: 'security_outbox.suppression_lifted' })
    expect(audited[0].details).to.include({ reason: 'permanent_bounce', channel: 'email' })
  })

  it('the previous release’s webhook call (seven arguments) still stores the event, and suppresses nothing: it names no recipient', async () => {
    const id = await insertOpenMessage(db.owner, { destination: 'frank@example.com' })
    await db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_messages')
        .where({ id })
        .update({ state: 'leased', lease_job_id: uuidv7(), lease_retry_count: 0, leased_at: new Date() })
      await trx('outbox.security_outbox_attempts').insert({
        message_id: id,
        attempt_no: 1,
        outcome: 'published',
        duration_ms: 5,
        provider_message_id: 'ses-previous-release',
      })
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
      await trx('outbox.security_outbox_messages')
        .where({ id })
        .update({ state: 'published', published_at: new Date(), attempt_count: 1, destination_hmac: randomBytes(32) })
    })
    const before = await db.owner('outbox.suppressed_destinations').count({ n: '*' })
    const { rows } = await db.owner.raw('SELECT * FROM outbox.record_delivery_event(?, ?, ?, ?, ?, ?, ?)', [
      'email',
      'ses-previous-release',
      'bounced',
      'Permanent/General',
      new Date(),
      new Date(),
      'permanent_bounce',
    ])
    expect(rows).to.deep.equal([{ outcome: 'stored', message_id: id, purpose: 'password_recovery' }])
    expect(await db.owner('outbox.security_outbox_delivery_events').where({ message_id: id })).to.have.length(1)
    expect(await db.owner('outbox.suppressed_destinations').count({ n: '*' })).to.deep.equal(before)
  })
})
