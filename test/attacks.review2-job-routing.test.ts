import { expect } from 'chai'
import type { Knex } from 'knex'
import { createKnex } from '../src/db/knex.ts'
import { QUEUES } from '../src/db/queues.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'

const DATA = JSON.stringify({ messageId: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f', deliveryId: '1' })

/**
 * The web may file only fresh jobs of the delivery queue (docs/architecture.md §6). A job's
 * `dead_letter` names the queue pg-boss moves it to once it has failed past its retries, and the
 * worker's login writes that move: a web job naming another queue there files, through the worker,
 * a job the web may not file itself (a webhook delivery, the crash-loop queues, a fan-out or a
 * maintenance run). Its only allowed value is the delivery queue's own crash-loop queue, which
 * pg-boss's own insert (`outbox.insert_delivery_job`) names.
 */
describe('attack: the web routes a delivery job into another queue through its dead letter (review2)', () => {
  let db: TestDatabase
  let api: Knex
  before(async () => {
    db = await createTestDatabase()
    api = createKnex(db.apiUrl, { applicationName: 'review2-job-routing', max: 2 })
  })
  after(async () => {
    await api.destroy()
    await db.drop()
  })
  const insertAsWeb = (table: string, deadLetter: string | null) =>
    api.raw(`INSERT INTO ${table} (name, data, dead_letter) VALUES (?, ?::jsonb, ?)`, [QUEUES.delivery, DATA, deadLetter]).then(
      () => 'allowed',
      (error: { code?: string }) => error.code,
    )

  for (const queue of [QUEUES.webhookDelivery, QUEUES.webhookCrashLoop, QUEUES.webhookFanOut, QUEUES.expiryPurge, QUEUES.retentionSweep])
    for (const table of ['pgboss.job', 'pgboss.job_common'])
      it(`refuses a fresh delivery job whose dead letter is ${queue} (through ${table})`, async () => {
        expect(await insertAsWeb(table, queue)).to.equal('42501')
      })

  it('still files one whose dead letter is the delivery queue’s crash-loop queue, or none', async () => {
    expect(await insertAsWeb('pgboss.job', QUEUES.crashLoop)).to.equal('allowed')
    expect(await insertAsWeb('pgboss.job', null)).to.equal('allowed')
    const filed = await db.owner('pgboss.job').where({ name: QUEUES.delivery, state: 'created' }).select('dead_letter')
    expect(filed.map((job: { dead_letter: string | null }) => job.dead_letter)).to.have.members([QUEUES.crashLoop, null])
  })
})
