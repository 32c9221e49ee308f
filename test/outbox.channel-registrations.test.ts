import { randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { createKnex } from '../src/db/knex.ts'
import { loadChannelDirectory } from '../src/outbox/channel-directory.ts'
import { startChannelRegistration } from '../src/outbox/channel-registration.ts'
import { availableChannels } from '../src/outbox/channel-registrations-sql.ts'
import { startWorker } from '../src/runtime/worker.ts'
import { registerChannelsAsWorker } from './support/channels.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { capturingLogger, eventually, testKeys, workerConfig } from './support/helpers.ts'
import { scriptedProvider } from './support/scripted-provider.ts'

const MINUTE = 60_000

/** docs/delivery.md "Channels": the workers register what they can send, the web reads the union of the current ones. */
describe('delivery channel registrations', () => {
  let db: TestDatabase
  const logs = capturingLogger()
  beforeEach(async () => {
    db = await createTestDatabase()
  })
  afterEach(async () => {
    await db?.drop()
  })
  const registrations = () => db.owner('outbox.delivery_channel_registrations').orderBy('seen_at')

  it('says so on a database no worker ever registered with (null, not no channels): the web then offers its own settings’ channels', async () => {
    const api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    try {
      expect(await availableChannels(api)).to.equal(null)
      await registerChannelsAsWorker(db.owner, [], new Date(), randomUUID())
      expect(await availableChannels(api), 'a worker without providers registered: no channels').to.deep.equal([])
    } finally {
      await api.destroy()
    }
  })

  it('keeps a stopped fleet’s channels, and drops a channel 3 minutes after the last worker that had it', async () => {
    const t0 = Date.UTC(2026, 11, 2, 12)
    await registerChannelsAsWorker(db.owner, ['email', 'whatsapp'], new Date(t0), randomUUID())
    // Nothing heartbeats for a day: the last known channels stay.
    expect(await availableChannels(db.owner)).to.deep.equal(['email', 'whatsapp'])
    const emailOnly = randomUUID()
    await registerChannelsAsWorker(db.owner, ['email'], new Date(t0 + 24 * 60 * MINUTE), emailOnly)
    expect(await availableChannels(db.owner)).to.deep.equal(['email'])
    // Within 3 minutes of the newest heartbeat, both count.
    await registerChannelsAsWorker(db.owner, ['whatsapp'], new Date(t0 + 24 * 60 * MINUTE - 3 * MINUTE), randomUUID())
    expect(await availableChannels(db.owner)).to.deep.equal(['email', 'whatsapp'])
  })

  it('refuses a channel the outbox does not know, in the table itself', async () => {
    const refused = await db.owner
      .raw(
        `INSERT INTO outbox.delivery_channel_registrations (worker_id, channels, providers, started_at, seen_at) VALUES (?, '{fax}', '{}', now(), now())`,
        [randomUUID()],
      )
      .then(
        () => 'inserted',
        (error: { code?: string }) => error.code,
      )
    expect(refused).to.equal('23514')
  })

  it('a worker registers at startup the channels it has a provider for, with the provider ids, and heartbeats until stopped', async () => {
    const worker = await startWorker({
      config: workerConfig({ INVITATION_LINK_BASE_URL: 'https://app.sealpost.test' }),
      workerUrl: db.workerUrl,
      keys: testKeys(),
      providers: [{ ...scriptedProvider(() => ({ providerMessageId: 'x' })), id: 'ses', channel: 'email' }],
      logger: logs.logger,
    })
    try {
      const [row] = await registrations()
      expect(row).to.include.keys('worker_id', 'started_at', 'seen_at')
      expect(row).to.deep.include({ channels: ['email'], providers: ['ses'] })
    } finally {
      await worker.stop()
    }
    // Stopping does not unregister: a fleet that is down keeps its channels.
    expect(await registrations()).to.have.length(1)

    let now = Date.UTC(2026, 11, 2, 12)
    const heartbeat = await startChannelRegistration({
      db: db.owner,
      registration: { workerId: randomUUID(), channels: ['email'], providers: ['ses'] },
      clock: () => new Date(now),
      logger: logs.logger,
      heartbeatMs: 5,
    })
    now += MINUTE
    const beat = await eventually(
      async () => (await registrations()).find((r) => r.seen_at.getTime() === now),
      'a heartbeat at the moved clock',
    )
    expect(beat.started_at.getTime()).to.equal(now - MINUTE)
    heartbeat.stop()
    await new Promise((resolve) => setTimeout(resolve, 20))
    now += MINUTE
    await new Promise((resolve) => setTimeout(resolve, 30))
    expect((await registrations()).find((r) => r.seen_at.getTime() === now)).to.equal(undefined)
  })

  it('the web’s directory keeps its last answer when a refresh fails, and logs the failure by error name only', async () => {
    await registerChannelsAsWorker(db.owner, ['email', 'whatsapp'])
    const api = createKnex(db.apiUrl, { applicationName: 'test-api' })
    const refreshLogs = capturingLogger()
    const directory = await loadChannelDirectory({ db: api, logger: refreshLogs.logger })
    try {
      expect(directory.has('whatsapp')).to.equal(true)
      await registerChannelsAsWorker(db.owner, ['email'], new Date(Date.now() + 4 * MINUTE), randomUUID())
      await directory.refresh()
      expect(directory.has('whatsapp')).to.equal(false)
      expect(directory.has('email')).to.equal(true)
      await api.destroy()
      await directory.refresh()
      expect(directory.has('email')).to.equal(true)
      expect(refreshLogs.text()).to.include('available channels not refreshed; keeping the last answer').and.include('"errorName"')
      expect(refreshLogs.text()).not.to.include(db.apiUrl)
    } finally {
      directory.stop()
      await api.destroy()
    }
  })
})
