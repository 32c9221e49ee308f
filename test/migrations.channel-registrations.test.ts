import { expect } from 'chai'
import { MIGRATION_CONFIG } from '../src/db/migrations.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

describe('upgrading to channel registrations (migration 20261202000600) beside the previous release', () => {
  let db: TestDatabase
  beforeEach(async () => {
    db = await createTestDatabase()
  })
  afterEach(async () => {
    await db?.drop()
  })
  const available = async () =>
    (await db.owner.raw<{ rows: { channels: string[] | null }[] }>('SELECT outbox.available_channels() AS channels')).rows[0]!.channels

  it("keeps the previous release's channels for a database that served traffic, so a new web beside old workers refuses nobody", async () => {
    for (const name of ['20261202000700_provider_states', '20261202000600_delivery_channel_registrations'])
      await db.owner.migrate.down({ ...MIGRATION_CONFIG, name })
    await insertOpenMessage(db.owner)
    await db.owner.migrate.latest(MIGRATION_CONFIG)
    expect(await available()).to.deep.equal(['email', 'whatsapp'])
  })

  it('gives a database no worker ever ran against no registration at all (NULL, 20261206006000): the web offers its settings’ channels', async () => {
    expect(await available()).to.equal(null)
  })
})
