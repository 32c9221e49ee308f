import { randomBytes, randomUUID } from 'node:crypto'
import { expect } from 'chai'
import { runRetentionSweep } from '../jobs/retention-sweep.ts'
import { availableChannels, registerDeliveryChannels } from '../src/outbox/channel-registrations-sql.ts'
import type { Channel } from '../src/outbox/constants.ts'
import { capturingLogger, createVerifiedIdentity, insertOpenMessage, uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

const DAY = 24 * 3600 * 1000
const HOUR = 3600 * 1000

describe('retention sweep', () => {
  const f = useOutboxFixture()

  /** A finished message with one attempt (and a dead letter when dead-lettered), finished at `at`. */
  async function finished(state: 'published' | 'dead_lettered', at: Date): Promise<string> {
    const id = await insertOpenMessage(f.db.owner)
    await f.db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_messages')
        .where({ id })
        .update({ state: 'leased', lease_job_id: randomUUID(), lease_retry_count: 0, leased_at: at })
      await trx('outbox.security_outbox_attempts').insert({
        message_id: id,
        attempt_no: 1,
        outcome: state === 'published' ? 'published' : 'failed',
        failure_class: state === 'published' ? null : 'REJECTED',
        duration_ms: 5,
      })
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
      if (state === 'published')
        await trx('outbox.security_outbox_messages').where({ id }).update({ state, published_at: at, attempt_count: 1 })
      else {
        await trx('outbox.security_outbox_messages').where({ id }).update({ state, dead_lettered_at: at, attempt_count: 1 })
        await trx('outbox.security_outbox_dead_letters').insert({
          message_id: id,
          reason: 'provider_rejected',
          last_failure_class: 'REJECTED',
          dead_lettered_at: at,
        })
      }
    })
    return id
  }

  it('deletes only what is past its window, with attempts and dead letters, and never an open message', async () => {
    const now = new Date()
    const ago = (ms: number) => new Date(now.getTime() - ms)
    const publishedOld = await finished('published', ago(30 * DAY + HOUR))
    const publishedKept = await finished('published', ago(30 * DAY - HOUR))
    const deadOld = await finished('dead_lettered', ago(90 * DAY + HOUR))
    const deadKept = await finished('dead_lettered', ago(90 * DAY - HOUR))
    const ancientPending = await insertOpenMessage(f.db.owner, { created_at: ago(400 * DAY), expires_at: ago(399 * DAY) })
    const ancientLeased = await insertOpenMessage(f.db.owner, { created_at: ago(400 * DAY), expires_at: ago(399 * DAY) })
    await f.db
      .owner('outbox.security_outbox_messages')
      .where({ id: ancientLeased })
      .update({ state: 'leased', lease_job_id: randomUUID(), lease_retry_count: 0, leased_at: ago(399 * DAY) })
    await f.db.owner('platform.rate_limit_hits').insert([
      { bucket_key: Buffer.alloc(32, 1), hit_at: ago(2 * DAY) },
      { bucket_key: Buffer.alloc(32, 2), hit_at: ago(HOUR) },
    ])

    const result = await runRetentionSweep({
      db: f.harness.worker,
      clock: () => now,
      logger: capturingLogger().logger,
      publishedDays: 30,
      auditDays: 400,
      deadLetteredDays: 90,
      batchSize: 1,
    })
    expect(result).to.include({ publishedDeleted: 1, deadLetteredDeleted: 1, rateLimitHitsDeleted: 1 })

    const remaining = await f.db.owner('outbox.security_outbox_messages').pluck('id')
    expect(remaining).to.have.members([publishedKept, deadKept, ancientPending, ancientLeased])
    expect(await f.db.owner('outbox.security_outbox_attempts').pluck('message_id')).to.have.members([publishedKept, deadKept])
    expect(await f.db.owner('outbox.security_outbox_dead_letters').pluck('message_id')).to.deep.equal([deadKept])
    expect(await f.db.owner('platform.rate_limit_hits')).to.have.length(1)
    expect(deadOld).to.not.be.oneOf(remaining)
    expect(publishedOld).to.not.be.oneOf(remaining)

    const again = await runRetentionSweep({
      db: f.harness.worker,
      clock: () => now,
      logger: capturingLogger().logger,
      publishedDays: 30,
      auditDays: 400,
      deadLetteredDays: 90,
    })
    expect(again).to.deep.equal({
      publishedDeleted: 0,
      deadLetteredDeleted: 0,
      rateLimitHitsDeleted: 0,
      sessionsDeleted: 0,
      elevationsDeleted: 0,
      challengesDeleted: 0,
      abandonedSignUpsDeleted: 0,
      invitationsDeleted: 0,
      platformRowsDeleted: 0,
      channelRegistrationsDeleted: 0,
      eventsDeleted: 0,
      batches: 0,
    })
  })

  it('prunes identity rows 30 days after they end, through a function the worker may only execute', async () => {
    const now = new Date()
    const ago = (ms: number) => new Date(now.getTime() - ms)
    const { identityId, loginIdentifierId } = await createVerifiedIdentity(f.db.owner, uniqueEmail('retained'))
    const sessions = [
      { id: randomUUID(), identity_id: identityId, token_hash: randomBytes(32), expires_at: ago(31 * DAY) },
      { id: randomUUID(), identity_id: identityId, token_hash: randomBytes(32), expires_at: ago(29 * DAY) },
      {
        id: randomUUID(),
        identity_id: identityId,
        token_hash: randomBytes(32),
        expires_at: new Date(now.getTime() + DAY),
        revoked_at: ago(40 * DAY),
      },
    ]
    await f.db.owner('identity.sessions').insert(sessions)
    const challenge = (expiresAt: Date) => ({
      id: randomUUID(),
      purpose: 'step_up',
      identity_id: identityId,
      login_identifier_id: loginIdentifierId,
      code_hash: randomBytes(32),
      expires_at: expiresAt,
    })
    const oldChallenge = challenge(ago(31 * DAY))
    const recentChallenge = challenge(ago(29 * DAY))
    await f.db.owner('identity.challenges').insert([oldChallenge, recentChallenge])
    const abandoned = randomUUID()
    await f.db.owner('identity.identities').insert({ id: abandoned, status: 'pending', created_at: ago(31 * DAY) })
    await f.db
      .owner('identity.login_identifiers')
      .insert({ id: randomUUID(), identity_id: abandoned, kind: 'email', value: uniqueEmail('abandoned'), created_at: ago(31 * DAY) })

    const result = await runRetentionSweep({
      db: f.harness.worker,
      clock: () => now,
      logger: capturingLogger().logger,
      publishedDays: 30,
      auditDays: 400,
      deadLetteredDays: 90,
    })
    expect(result).to.include({ sessionsDeleted: 2, challengesDeleted: 1, abandonedSignUpsDeleted: 1 })
    expect(await f.db.owner('identity.sessions').pluck('id')).to.deep.equal([sessions[1]!.id])
    expect(await f.db.owner('identity.challenges').pluck('id')).to.deep.equal([recentChallenge.id])
    expect(await f.db.owner('identity.identities').where({ id: abandoned })).to.have.length(0)
    expect(await f.db.owner('identity.identities').where({ id: identityId })).to.have.length(1)
  })

  it('forgets a worker registration a week after its last heartbeat, but never the ones that make up the available channels', async () => {
    const now = new Date()
    const ago = (ms: number) => new Date(now.getTime() - ms)
    const sweep = () =>
      runRetentionSweep({
        db: f.harness.worker,
        clock: () => now,
        logger: capturingLogger().logger,
        publishedDays: 30,
        auditDays: 400,
        deadLetteredDays: 90,
      })
    const register = (workerId: string, seenAt: Date, channels: Channel[]) =>
      registerDeliveryChannels(f.harness.worker, { workerId, channels, providers: ['ses'] }, seenAt)
    const [lastFleet, itsNeighbour, olderFleet, recent, current] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()]
    // The whole fleet has been down for ten days: its last workers still say which channels exist.
    await register(lastFleet, ago(10 * DAY), ['email', 'whatsapp'])
    await register(itsNeighbour, ago(10 * DAY + 2 * 60_000), ['email'])
    await register(olderFleet, ago(10 * DAY + 10 * 60_000), ['email'])
    expect((await sweep()).channelRegistrationsDeleted).to.equal(1)
    expect(await f.db.owner('outbox.delivery_channel_registrations').pluck('worker_id')).to.have.members([lastFleet, itsNeighbour])
    expect(await availableChannels(f.harness.api)).to.deep.equal(['email', 'whatsapp'])

    // A worker is back: the ten-day-old registrations are no longer the current set and go; six days old stays.
    await register(recent, ago(6 * DAY), ['email'])
    await register(current, now, ['email'])
    expect((await sweep()).channelRegistrationsDeleted).to.equal(2)
    expect(await f.db.owner('outbox.delivery_channel_registrations').pluck('worker_id')).to.have.members([recent, current])
    expect(await availableChannels(f.harness.api)).to.deep.equal(['email'])
  })

  it('deletes events older than RETENTION_EVENTS_DAYS with their webhook deliveries, as the worker, and keeps newer ones', async () => {
    const now = new Date()
    const endpointId = randomUUID()
    await f.db.owner('platform.webhook_endpoints').insert({
      id: endpointId,
      url: 'https://hooks.example.com/sealpost',
      events: ['identity.created'],
      secret_envelope: 'v2.0.sealed',
      created_at: now,
      created_by: randomUUID(),
    })
    const event = async (ageDays: number) => {
      const [row] = await f.db
        .owner('platform.events')
        .insert({ type: 'identity.created', occurred_at: new Date(now.getTime() - ageDays * DAY), payload: { identityId: randomUUID() } })
        .returning('id')
      await f.db.owner('platform.webhook_deliveries').insert({ event_id: row.id, endpoint_id: endpointId, next_attempt_at: now })
      return row.id as string
    }
    const [old, recent] = [await event(31), await event(29)]
    const swept = await runRetentionSweep({
      db: f.harness.worker,
      clock: () => now,
      logger: capturingLogger().logger,
      publishedDays: 30,
      auditDays: 400,
      deadLetteredDays: 90,
      eventDays: 30,
    })
    expect(swept.eventsDeleted).to.be.at.least(1)
    expect(await f.db.owner('platform.events').whereIn('id', [old, recent]).pluck('id')).to.deep.equal([recent])
    expect(await f.db.owner('platform.webhook_deliveries').where({ endpoint_id: endpointId }).pluck('event_id')).to.deep.equal([recent])
  })
})
