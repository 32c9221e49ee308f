import { expect } from 'chai'
import type { Knex } from 'knex'
import { uuidv7 } from 'uuidv7'
import type { Job, PgBoss } from 'pg-boss'
import type { DeliveryDeps } from '../../jobs/delivery-deps.ts'
import { createBoss } from '../../src/db/boss.ts'
import { createKnex } from '../../src/db/knex.ts'
import type { Provider } from '../../src/providers/provider.ts'
import { issueChallengeTx } from '../../src/identity/challenge-issue.ts'
import { parseIdentifier } from '../../src/identity/identifiers.ts'
import { requestPasswordRecovery } from '../../src/identity/password-recovery.ts'
import type { Logger } from '../../src/logging/logger.ts'
import { QUEUES, type Channel, type DeliveryJobData } from '../../src/outbox/constants.ts'
import type { EnqueueDeps } from '../../src/outbox/enqueue.ts'
import type { Keys } from '../../src/runtime/dev-keys.ts'
import { createTestDatabase, type TestDatabase } from './database.ts'
import { capturingLogger, createVerifiedIdentity, testKeys } from './helpers.ts'

export const SCHEDULE = [5_000, 30_000, 120_000, 600_000, 1_800_000]

/**
 * The web's enqueue path and a worker's building blocks on one test database, with the clock in
 * the test's hands: jobs are fetched explicitly and delivered with `deliverOne` (a runOnce).
 */
export async function outboxHarness(db: TestDatabase, options: { keys: Keys; clock: () => Date; logger: Logger }) {
  const api: Knex = createKnex(db.apiUrl, { applicationName: 'test-api' })
  const worker: Knex = createKnex(db.workerUrl, { applicationName: 'test-worker', max: 20 })
  const webBoss: PgBoss = createBoss(db.apiUrl, 'web', options.logger)
  // The worker login's pg-boss configured as the web's (no supervisor, cron, LISTEN or fleet
  // registration): the test fetches and settles jobs itself.
  const workerBoss: PgBoss = createBoss(db.workerUrl, 'web', options.logger)
  await Promise.all([webBoss.start(), workerBoss.start()])

  const challengeDeps = (challengeTtlSeconds: number, envelopeVersion?: EnqueueDeps['envelopeVersion']) => ({
    envelopeVersion,
    boss: webBoss,
    outboxKey: options.keys.outboxKey,
    codeHashKey: options.keys.codeHashKey,
    challengeTtlSeconds,
    clock: options.clock,
    logger: options.logger,
    channels: new Set<Channel>(['email', 'whatsapp']),
  })

  return {
    api,
    worker,
    webBoss,
    workerBoss,
    /** A verified identity for `identifier` and one recovery code on its way to it (sealed in the version a web would negotiate). */
    async enqueue(
      identifier: string,
      challengeTtlSeconds = 7_200,
      envelopeVersion?: EnqueueDeps['envelopeVersion'],
    ): Promise<{ messageId: string }> {
      await createVerifiedIdentity(db.owner, identifier)
      const parsed = parseIdentifier(identifier)!
      await api.transaction((trx) => requestPasswordRecovery(trx, challengeDeps(challengeTtlSeconds, envelopeVersion), parsed))
      const message = await db
        .owner('outbox.security_outbox_messages')
        .where({ destination: parsed.value })
        .orderBy('created_at', 'desc')
        .first()
      return { messageId: message.id }
    },
    /**
     * A verified identity for `identifier` and a code to it that a stranger asked for, as a sign-up
     * to an existing account enqueues one (a recovery code, `asked` stranger): what a pump aims,
     * and what the send caps hold (docs/security.md "Caps from the owner's side").
     */
    async enqueueStrangers(identifier: string, challengeTtlSeconds = 7_200): Promise<{ messageId: string }> {
      const subject = await createVerifiedIdentity(db.owner, identifier)
      const parsed = parseIdentifier(identifier)!
      await api.transaction((trx) =>
        issueChallengeTx(trx, challengeDeps(challengeTtlSeconds), {
          purpose: 'password_recovery',
          ...subject,
          identifier: parsed,
          asked: 'stranger',
        }),
      )
      const message = await db
        .owner('outbox.security_outbox_messages')
        .where({ destination: parsed.value })
        .orderBy('created_at', 'desc')
        .first()
      return { messageId: message.id }
    },
    /** A backlog: verified identities in bulk, then one code each, a hundred per transaction. */
    async enqueueMany(identifiers: string[], challengeTtlSeconds = 7_200): Promise<void> {
      const parsed = identifiers.map((identifier) => parseIdentifier(identifier)!)
      const ids = parsed.map(() => ({ identity: uuidv7(), login: uuidv7() }))
      const now = new Date()
      await db.owner.batchInsert(
        'identity.identities',
        ids.map(({ identity }) => ({ id: identity, status: 'active' })),
        500,
      )
      await db.owner.batchInsert(
        'identity.login_identifiers',
        parsed.map((identifier, i) => ({
          id: ids[i]!.login,
          identity_id: ids[i]!.identity,
          kind: identifier.kind,
          value: identifier.value,
          verified_at: now,
        })),
        500,
      )
      for (let start = 0; start < parsed.length; start += 100) {
        await api.transaction(async (trx) => {
          for (const identifier of parsed.slice(start, start + 100))
            await requestPasswordRecovery(trx, challengeDeps(challengeTtlSeconds), identifier)
        })
      }
    },
    /** Claims the next job as a worker would; `ignoreStartAfter` stands in for waiting out a delay. */
    async nextJob(): Promise<Job<DeliveryJobData>> {
      const [job] = await workerBoss.fetch<DeliveryJobData>(QUEUES.delivery, { ignoreStartAfter: true })
      if (!job) throw new Error('no job to fetch')
      return job
    },
    /**
     * The job due first by the test's clock, handed out by pg-boss as a worker's fetch would: its
     * start is moved back to the database's real now, and the test's clock forward to its start
     * (jobs are scheduled by the test's clock, which runs ahead of the database's). Undefined when
     * no job waits.
     */
    async nextDueJob(clock: { now: Date }): Promise<Job<DeliveryJobData> | undefined> {
      const due: { id: string; start_after: Date } | undefined = await workerBoss
        .getDb()
        .executeSql(
          `SELECT id, start_after FROM pgboss.job WHERE name = $1 AND state IN ('created', 'retry') ORDER BY start_after, priority DESC, created_on LIMIT 1`,
          [QUEUES.delivery],
        )
        .then((result: { rows: { id: string; start_after: Date }[] }) => result.rows[0])
      if (!due) return undefined
      if (due.start_after.getTime() > clock.now.getTime()) clock.now = due.start_after
      await workerBoss
        .getDb()
        .executeSql(`UPDATE pgboss.job SET start_after = now() - interval '1 second' WHERE name = $1 AND id = $2`, [
          QUEUES.delivery,
          due.id,
        ])
      const [job] = await workerBoss.fetch<DeliveryJobData>(QUEUES.delivery)
      return job
    },
    /** A channel's provider, or its providers in failover order. */
    deps(providers: Partial<Record<Channel, Provider | Provider[]>>, sendTimeoutMs = 2_000): DeliveryDeps {
      return {
        db: worker,
        boss: workerBoss,
        outboxKey: options.keys.outboxKey,
        providers: Object.fromEntries(
          Object.entries(providers).map(([channel, chain]) => [channel, Array.isArray(chain) ? chain : [chain]]),
        ),
        clock: options.clock,
        logger: options.logger,
        settings: { maxAttempts: 5, retrySchedule: SCHEDULE, sendTimeoutMs },
        invitationLinkBaseUrl: 'https://app.sealpost.test',
      }
    },
    async close() {
      await Promise.all([webBoss.stop({ graceful: false }), workerBoss.stop({ graceful: false })])
      await Promise.all([api.destroy(), worker.destroy()])
    },
  }
}

/** Reads of the outbox tables as the owner, on whichever database `current` returns at call time. */
export function outboxRows(current: () => TestDatabase) {
  const owner = () => current().owner
  return {
    message: (id: string) => owner()('outbox.security_outbox_messages').where({ id }).first(),
    attempts: (id: string) => owner()('outbox.security_outbox_attempts').where({ message_id: id }).orderBy('attempt_no'),
    deadLetter: (id: string) => owner()('outbox.security_outbox_dead_letters').where({ message_id: id }).first(),
    ciphertexts: async (id: string) => (await owner()('outbox.security_outbox_ciphertexts').where({ message_id: id })).length,
    jobState: async (id: string) => (await owner()('pgboss.job').where({ id }).first()).state as string,
    queuedJob: (messageId: string) =>
      owner()('pgboss.job').where({ name: QUEUES.delivery, state: 'created' }).whereRaw("data->>'messageId' = ?", [messageId]).first(),
    /** The message went final unsent: dead-lettered for `reason` with no attempt spent, its ciphertext gone. */
    expectDeadLetteredUnsent: async (messageId: string, reason: string) => {
      expect(await owner()('outbox.security_outbox_messages').where({ id: messageId }).first()).to.include({
        state: 'dead_lettered',
        attempt_count: 0,
      })
      expect(await owner()('outbox.security_outbox_dead_letters').where({ message_id: messageId }).first()).to.include({ reason })
      expect(await owner()('outbox.security_outbox_ciphertexts').where({ message_id: messageId })).to.have.length(0)
    },
    /** Puts the message's destination on the suppression list, as a permanent bounce or a complaint would. */
    suppress: async (messageId: string, reason: 'permanent_bounce' | 'complaint' = 'permanent_bounce') => {
      const { destination_hmac: destinationHmac, channel } = await owner()('outbox.security_outbox_messages')
        .where({ id: messageId })
        .first()
      await owner()('outbox.suppressed_destinations').insert({
        id: uuidv7(),
        destination_hmac: destinationHmac,
        channel,
        masked_destination: 's•••d@e•••.com',
        reason,
        since: new Date(),
      })
    },
  }
}

export type OutboxHarness = Awaited<ReturnType<typeof outboxHarness>>

/**
 * Registers per-test hooks: a fresh database and harness, a clock the test moves by assigning
 * `now`, and captured logs. Read the fields inside tests, never at describe time.
 */
export function useOutboxFixture() {
  let db: TestDatabase
  const fixture = {
    now: new Date(),
    keys: testKeys(),
    logs: capturingLogger(),
    get db(): TestDatabase {
      return db
    },
    harness: undefined as unknown as OutboxHarness,
    rows: outboxRows(() => db),
  }
  beforeEach(async () => {
    fixture.now = new Date()
    fixture.logs = capturingLogger()
    db = await createTestDatabase()
    fixture.harness = await outboxHarness(db, { keys: fixture.keys, clock: () => fixture.now, logger: fixture.logs.logger })
  })
  afterEach(async () => {
    await fixture.harness.close()
    await db.drop()
  })
  return fixture
}
