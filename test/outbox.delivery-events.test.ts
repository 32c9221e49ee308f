import { randomBytes, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { runRetentionSweep } from '../jobs/retention-sweep.ts'
import { createKnex } from '../src/db/knex.ts'
import { MIGRATION_CONFIG } from '../src/db/migrations.ts'
import { canonicalDestination, destinationHmac } from '../src/outbox/destination.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, insertOpenMessage } from './support/helpers.ts'

const DAY = 24 * 3600 * 1000

describe('delivery events and suppressions in the database', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })

  it('canonicalizes a destination for budgets: lower case, +tag dropped from an email’s local part; the suppression HMAC does not fold', () => {
    expect(canonicalDestination('email', ' Alice+Shop@Example.COM ')).to.equal('alice@example.com')
    expect(canonicalDestination('email', 'a+b+c@x.test')).to.equal('a@x.test')
    expect(canonicalDestination('email', '+tag@x.test'), 'an empty local part is kept as written').to.equal('+tag@x.test')
    expect(canonicalDestination('whatsapp', '+4915112345678')).to.equal('+4915112345678')
    const key = randomBytes(32)
    const hmac = (address: string) => destinationHmac(key, 'email', address).toString('hex')
    expect(hmac(' Alice+X@Example.COM '), 'only case and spaces fold').to.equal(hmac('alice+x@example.com'))
    expect(hmac('alice+x@example.com'), 'a +tag is another address').to.not.equal(hmac('alice@example.com'))
    expect(hmac('a.lice@gmail.com'), 'and so are Gmail’s dots').to.not.equal(hmac('alice@gmail.com'))
    expect(destinationHmac(key, 'whatsapp', ' +4915112345678').equals(destinationHmac(key, 'whatsapp', '+4915112345678'))).to.equal(true)
    expect(
      destinationHmac(key, 'email', 'alice@example.com').equals(destinationHmac(randomBytes(32), 'email', 'alice@example.com')),
    ).to.equal(false)
  })

  it('the retention sweep takes a message’s events with it; its suppression stays, without the message', async () => {
    const at = new Date(Date.now() - 31 * DAY)
    const id = await insertOpenMessage(db.owner)
    const destinationHmacOfRow = randomBytes(32)
    await db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_messages')
        .where({ id })
        .update({ state: 'leased', lease_job_id: randomUUID(), lease_retry_count: 0, leased_at: at })
      await trx('outbox.security_outbox_attempts').insert({
        message_id: id,
        attempt_no: 1,
        outcome: 'published',
        duration_ms: 5,
        provider_message_id: 'ses-old',
      })
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
      await trx('outbox.security_outbox_messages')
        .where({ id })
        .update({ state: 'published', published_at: at, attempt_count: 1, destination_hmac: destinationHmacOfRow })
    })
    const { rows } = await db.owner.raw('SELECT * FROM outbox.record_delivery_event(?, ?, ?, ?, ?, ?, ?, ?::bytea[])', [
      'email',
      'ses-old',
      'bounced',
      'Permanent/General',
      at,
      at,
      'permanent_bounce',
      [destinationHmacOfRow],
    ])
    expect(rows[0]).to.include({ outcome: 'stored', message_id: id, suppressed: true })
    // As the worker runs it: the cascade to the events needs no grant of its own.
    const worker = createKnex(db.workerUrl, { applicationName: 'events-worker', max: 1 })
    const result = await runRetentionSweep({
      db: worker,
      clock: () => new Date(),
      logger: capturingLogger().logger,
      publishedDays: 30,
      auditDays: 400,
      deadLetteredDays: 90,
    }).finally(() => worker.destroy())
    expect(result.publishedDeleted).to.be.at.least(1)
    expect(await db.owner('outbox.security_outbox_delivery_events').where({ message_id: id })).to.have.length(0)
    const suppression = await db.owner('outbox.suppressed_destinations').where({ reason: 'permanent_bounce' }).first()
    expect(suppression).to.include({ message_id: null, masked_destination: 'r•••w@e•••.com' })
  })

  it('its migration goes down and up again', async () => {
    // Every migration after this one first, newest first (later ones replace its functions), then this one.
    const undo = async () => {
      const [done] = (await db.owner.migrate.list(MIGRATION_CONFIG)) as [{ name: string }[], unknown]
      const last = done.at(-1)!.name
      await db.owner.migrate.down(MIGRATION_CONFIG)
      return last
    }
    while ((await undo()) !== '20261201000500_delivery_events');
    expect((await db.owner.raw(`SELECT to_regclass('outbox.suppressed_destinations') AS t`)).rows[0].t).to.equal(null)
    await db.owner.migrate.latest(MIGRATION_CONFIG)
    expect((await db.owner.raw(`SELECT to_regclass('outbox.suppressed_destinations') AS t`)).rows[0].t).to.equal(
      'outbox.suppressed_destinations',
    )
  })
})
