import { createHash, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import pg from 'pg'
import { captureJobInsert, notificationOf } from '../src/db/boss.ts'
import { QUEUES } from '../src/outbox/constants.ts'
import { capturingLogger } from './support/helpers.ts'
import { openWebSide, type WebSide } from './support/web-side.ts'

/**
 * What Sealpost takes from pg-boss beyond its public API: its job insert, captured through
 * `boss.send` and compiled into `outbox.insert_delivery_job` at release, and the channel that
 * insert notifies. An upgrade of pg-boss that changes either must be looked at before it ships.
 */
describe('what Sealpost takes from pg-boss', () => {
  let side: WebSide
  beforeEach(async () => {
    side = await openWebSide(capturingLogger().logger)
  })
  afterEach(() => side.close())

  it('the channel cut from pg-boss’s job insert is the one a job sent through pg-boss notifies', async () => {
    const { sql } = await captureJobInsert(side.boss, QUEUES.delivery, {}, randomUUID())
    const { rows } = await side.db.owner.raw<{ rows: { channel: string }[] }>(
      `SELECT ${notificationOf(sql, QUEUES.delivery).channel} AS channel`,
    )
    const listener = new pg.Client({ connectionString: side.db.ownerUrl })
    await listener.connect()
    try {
      const heard = new Promise<string | undefined>((resolve) => listener.on('notification', (message) => resolve(message.payload)))
      await listener.query(`LISTEN "${rows[0]!.channel}"`)
      await side.boss.send(QUEUES.delivery, { messageId: randomUUID() })
      expect(await heard).to.equal(QUEUES.delivery)
    } finally {
      await listener.end()
    }
  })

  it('pg-boss’s job insert is the statement this release was built against', async () => {
    const { sql, json } = await captureJobInsert(side.boss, QUEUES.delivery, { messageId: 'm' }, randomUUID())
    const job = (JSON.parse(json) as Record<string, unknown>[])[0]!
    const pin = { statementSha256: createHash('sha256').update(sql).digest('hex'), jobKeys: Object.keys(job).sort() }
    expect(
      pin,
      'pg-boss changed its job insert: outbox.insert_delivery_job is rebuilt from it at release, but during a rolling ' +
        'upgrade the previous release’s web passes its job JSON to the new statement (and the new web to the old one). ' +
        'Check that both read the same JSON, say so in CHANGELOG.md, then update this pin',
    ).to.deep.equal(PINNED_JOB_INSERT)
  })
})

/** pg-boss 12.38.0's (the version in package-lock.json when this pin was taken). */
const PINNED_JOB_INSERT = {
  statementSha256: '73c539e002a17524d9a10f0b77b75b99c88e9af1548e66fff7659936237be7a4',
  jobKeys: ['__traceContext', 'data', 'deadLetter', 'groupId', 'groupTier', 'id', 'name', 'priority', 'singletonKey', 'singletonOffset'],
}
