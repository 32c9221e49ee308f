import { expect } from 'chai'
import {
  ATTEMPT_OUTCOMES,
  CHANNELS,
  DEAD_LETTER_REASONS,
  FAILURE_CLASSES,
  MESSAGE_STATES,
  PROVIDER_IDS,
  PROVIDER_STATES,
  PURPOSES,
} from '../src/outbox/constants.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

/** docs/architecture.md §6: invariants the database itself enforces, tried as the owner, who could break them. */
describe('security outbox invariants', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db.drop()
  })

  const messages = () => db.owner('outbox.security_outbox_messages')
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: { code?: string }) => error,
    )
  const lease = { state: 'leased', lease_job_id: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f', lease_retry_count: 0, leased_at: new Date() }

  async function publish(id: string) {
    await db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_messages').where({ id }).update(lease)
      await trx('outbox.security_outbox_attempts').insert({ message_id: id, attempt_no: 1, outcome: 'published', duration_ms: 1 })
      await trx('outbox.security_outbox_messages').where({ id }).update({ state: 'published', published_at: new Date(), attempt_count: 1 })
      await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
    })
  }
  const attempt = (id: string, attemptNo: number) => ({
    message_id: id,
    attempt_no: attemptNo,
    outcome: 'retryable_error',
    failure_class: 'UNAVAILABLE',
    duration_ms: 1,
  })

  it('never changes a final state', async () => {
    const id = await insertOpenMessage(db.owner)
    await publish(id)
    const error = await failure(messages().where({ id }).update({ state: 'pending', published_at: null }))
    expect(error?.code).to.equal('23000')
    expect((await messages().where({ id }).first()).state).to.equal('published')
  })

  it('never changes where a message goes or what it is for, not even for the owner', async () => {
    const id = await insertOpenMessage(db.owner)
    const changes: Record<string, unknown>[] = [
      { destination: 'attacker@example.com' },
      { channel: 'whatsapp' },
      { purpose: 'step_up' },
      { challenge_id: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f' },
      { invitation_id: '01a22d1f-4e0c-7711-8dbc-3725e1d0239f' },
    ]
    const before = await messages().where({ id }).first()
    for (const change of changes) {
      const error = await failure(messages().where({ id }).update(change))
      expect(error?.code, Object.keys(change)[0]).to.equal('23000')
    }
    expect(await messages().where({ id }).first()).to.deep.equal(before)
    // Writing a column's own value again is no change: delivery's updates name only their columns, but an ORM may not.
    await messages()
      .where({ id })
      .update({ destination: before.destination, available_at: new Date(0) })
  })

  it('numbers attempts 1, 2, 3… and keeps attempt_count in step, checked at commit', async () => {
    const id = await insertOpenMessage(db.owner)
    await messages().where({ id }).update(lease)
    const skipped = await failure(db.owner('outbox.security_outbox_attempts').insert(attempt(id, 2)))
    expect(skipped?.code, 'attempt 2 first').to.equal('23000')
    const uncounted = await failure(db.owner('outbox.security_outbox_attempts').insert(attempt(id, 1)))
    expect(uncounted?.code, 'an attempt whose message does not count it').to.equal('23000')
    await db.owner.transaction(async (trx) => {
      await trx('outbox.security_outbox_attempts').insert(attempt(id, 1))
      await trx('outbox.security_outbox_messages').where({ id }).update({ attempt_count: 1 })
    })
    expect((await messages().where({ id }).first()).attempt_count).to.equal(1)
    const repeated = await failure(
      db.owner('outbox.security_outbox_attempts').insert({ ...attempt(id, 1), outcome: 'published', failure_class: null }),
    )
    expect(repeated?.code).to.be.oneOf(['23000', '23505'])
    const third = await failure(db.owner('outbox.security_outbox_attempts').insert(attempt(id, 3)))
    expect(third?.code, 'attempt 3 before 2').to.equal('23000')
    const byHand = await failure(messages().where({ id }).update({ attempt_count: 4 }))
    expect(byHand?.code, 'an attempt_count no attempt row matches').to.equal('23000')
    expect((await messages().where({ id }).first()).attempt_count).to.equal(1)
  })

  it('records an attempt only under a lease', async () => {
    const id = await insertOpenMessage(db.owner)
    const error = await failure(
      db.owner('outbox.security_outbox_attempts').insert({ message_id: id, attempt_no: 1, outcome: 'published', duration_ms: 1 }),
    )
    expect(error?.code).to.equal('23000')
  })

  it('refuses a published message that keeps its ciphertext, at commit', async () => {
    const id = await insertOpenMessage(db.owner)
    const error = await failure(
      db.owner.transaction(async (trx) => {
        await trx('outbox.security_outbox_messages').where({ id }).update(lease)
        await trx('outbox.security_outbox_attempts').insert({ message_id: id, attempt_no: 1, outcome: 'published', duration_ms: 1 })
        await trx('outbox.security_outbox_messages')
          .where({ id })
          .update({ state: 'published', published_at: new Date(), attempt_count: 1 })
      }),
    )
    expect(error?.code).to.equal('23000')
    expect((await messages().where({ id }).first()).state).to.equal('pending')
  })

  it('refuses a dead-lettered message that keeps its ciphertext, at commit', async () => {
    const id = await insertOpenMessage(db.owner)
    const error = await failure(messages().where({ id }).update({ state: 'dead_lettered', dead_lettered_at: new Date() }))
    expect(error?.code).to.equal('23000')
    expect((await messages().where({ id }).first()).state).to.equal('pending')
  })

  it('refuses a leased message without a lease', async () => {
    const id = await insertOpenMessage(db.owner)
    const error = await failure(messages().where({ id }).update({ state: 'leased' }))
    expect(error?.code).to.equal('23514')
  })

  it('refuses a ciphertext for a message already final', async () => {
    const id = await insertOpenMessage(db.owner)
    await publish(id)
    const error = await failure(db.owner('outbox.security_outbox_ciphertexts').insert({ message_id: id, envelope: 'v1.a.b.c.d' }))
    expect(error?.code).to.equal('23000')
  })

  it('checks attempts by index even when the tables were last analyzed empty (a fresh deployment, a burst after a quiet night)', async () => {
    const fresh = await createTestDatabase()
    try {
      // Analyzed empty: the planner takes a sequential scan for free, and a trigger keeps its plan for
      // the connection's life, each later attempt scanning every attempt there is.
      await fresh.owner.raw(
        'VACUUM ANALYZE outbox.security_outbox_attempts, outbox.security_outbox_messages, outbox.security_outbox_ciphertexts',
      )
      const ids = [await insertOpenMessage(fresh.owner), await insertOpenMessage(fresh.owner)]
      await fresh.owner.transaction(async (trx) => {
        for (const id of ids) {
          await trx('outbox.security_outbox_messages').where({ id }).update(lease)
          await trx('outbox.security_outbox_attempts').insert({ message_id: id, attempt_no: 1, outcome: 'published', duration_ms: 1 })
          await trx('outbox.security_outbox_messages')
            .where({ id })
            .update({ state: 'published', published_at: new Date(), attempt_count: 1 })
          await trx('outbox.security_outbox_ciphertexts').where({ message_id: id }).delete()
        }
        // The deferred checks run now, inside this transaction, so its own counters show their scans.
        await trx.raw('SET CONSTRAINTS ALL IMMEDIATE')
        const { rows } = await trx.raw<{ rows: { seq_scan: string; idx_scan: string }[] }>(
          `SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'outbox' AND relname = 'security_outbox_attempts'`,
        )
        // Only the triggers read the attempts here: the attempt-count check at commit, per message.
        expect(Number(rows[0]!.idx_scan), 'the checks ran').to.be.at.least(ids.length)
        expect(Number(rows[0]!.seq_scan), 'sequential scans of the attempts').to.equal(0)
      })
      expect((await fresh.owner('outbox.security_outbox_messages').whereIn('id', ids).where({ state: 'published' })).length).to.equal(2)
    } finally {
      await fresh.drop()
    }
  })

  it('has a CHECK constraint for every frozen list of names that allows exactly that list', async () => {
    const lists: [string, string, readonly string[]][] = [
      ['security_outbox_messages', 'purpose', PURPOSES],
      ['security_outbox_messages', 'channel', CHANNELS],
      ['security_outbox_messages', 'state', MESSAGE_STATES],
      ['security_outbox_attempts', 'outcome', ATTEMPT_OUTCOMES],
      ['security_outbox_attempts', 'failure_class', FAILURE_CLASSES],
      ['security_outbox_dead_letters', 'reason', DEAD_LETTER_REASONS],
      ['security_outbox_dead_letters', 'last_failure_class', FAILURE_CLASSES],
      ['provider_pauses', 'channel', CHANNELS],
      ['send_windows', 'channel', CHANNELS],
      ['security_outbox_attempts', 'provider', PROVIDER_IDS],
      ['provider_states', 'provider', PROVIDER_IDS],
      ['provider_states', 'channel', CHANNELS],
      ['provider_states', 'state', PROVIDER_STATES],
      ['delivery_channel_registrations', 'channels', CHANNELS],
      ['security_outbox_attempts', 'channel', CHANNELS],
      ['suppressed_destinations', 'channel', CHANNELS],
    ]
    for (const [table, column, names] of lists) {
      const { rows } = await db.owner.raw<{ rows: { def: string }[] }>(
        `SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
          WHERE c.conrelid = ?::regclass AND c.contype = 'c' AND a.attname = ? AND array_length(c.conkey, 1) = 1`,
        [`outbox.${table}`, column],
      )
      expect(rows, `${table}.${column} has one single-column CHECK`).to.have.length(1)
      const allowed = [...rows[0]!.def.matchAll(/'([^']+)'::text/g)].map((match) => match[1])
      expect(allowed.sort(), `${table}.${column}`).to.deep.equal([...names].sort())
    }
  })
})
