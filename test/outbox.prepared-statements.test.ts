import { expect } from 'chai'
import type { Knex } from 'knex'
import { claimRequestOf } from '../jobs/delivery-deps.ts'
import { createKnex, statementName } from '../src/db/knex.ts'
import { CLAIM_SQL, leaseClaimableMessages } from '../src/outbox/claim-sql.ts'
import { PUBLISH_SQL, publishLeasedMessagesTx } from '../src/outbox/publish-sql.ts'
import { uniqueEmail } from './support/helpers.ts'
import { useOutboxFixture } from './support/outbox-harness.ts'

describe("the worker hot path's statements: prepared, and planned by the primary key", () => {
  const f = useOutboxFixture()

  /** The statements this connection holds prepared under our prefix, by text. */
  const preparedOn = async (trx: Knex.Transaction) => {
    const { rows } = await trx.raw<{ rows: { name: string; statement: string }[] }>(
      `SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'sealpost\\_%' ORDER BY name`,
    )
    return rows
  }

  it('claims and publishes through one prepared statement each per connection, whatever the batch size', async () => {
    const first = await f.harness.enqueue(uniqueEmail('prepared-1'))
    const second = await f.harness.enqueue(uniqueEmail('prepared-2'))
    const third = await f.harness.enqueue(uniqueEmail('prepared-3'))
    const jobs = [await f.harness.nextJob(), await f.harness.nextJob(), await f.harness.nextJob()]
    await f.harness.worker.transaction(async (trx) => {
      // One job, then two: a text that varied with the batch would leave a statement per size.
      const one = await leaseClaimableMessages(trx, jobs.slice(0, 1).map(claimRequestOf), f.now)
      const two = await leaseClaimableMessages(trx, jobs.slice(1).map(claimRequestOf), f.now)
      expect([...one, ...two].map((row) => row.id).sort()).to.deep.equal([first.messageId, second.messageId, third.messageId].sort())
      for (const batch of [jobs.slice(0, 2), jobs.slice(2)]) {
        const published = await publishLeasedMessagesTx(
          trx,
          batch.map((job) => ({
            ...claimRequestOf(job),
            providerMessageId: `p-${job.id}`,
            durationMs: 5,
            provider: 'ses',
            channel: 'email',
          })),
          f.now,
        )
        expect(published).to.have.length(batch.length)
      }
      const prepared = await preparedOn(trx)
      expect(prepared, 'one claim and one publish statement, nothing else').to.have.length(2)
      expect(prepared.filter((row) => row.statement.includes('leased_at ='))).to.have.length(1)
      expect(prepared.filter((row) => row.statement.includes('published_at ='))).to.have.length(1)
    })
  })

  it('keeps the generic plan of a one-message claim: planned a few times per connection, not at every call', async () => {
    const jobs: Awaited<ReturnType<typeof f.harness.nextJob>>[] = []
    for (let i = 0; i < 9; i++) {
      await f.harness.enqueue(uniqueEmail(`single-${i}`))
      jobs.push(await f.harness.nextJob())
    }
    await f.harness.worker.transaction(async (trx) => {
      for (const job of jobs) expect(await leaseClaimableMessages(trx, [claimRequestOf(job)], f.now)).to.have.length(1)
      const { rows } = await trx.raw<{ rows: { generic_plans: number; custom_plans: number }[] }>(
        `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'sealpost\\_%' AND statement LIKE '%leased_at =%'`,
      )
      // PostgreSQL plans the first five calls for their values, then keeps the generic plan only if
      // it costs no more than they did. Without the subqueries around the arrays, their lengths in
      // view, it never did at one job (0 generic plans).
      expect(rows).to.deep.equal([{ generic_plans: 4, custom_plans: 5 }])
    })
  })

  it('survives a migration that changes the type of a column the claim returns, as the release step may under running workers', async () => {
    const [a, b, c] = [
      await f.harness.enqueue(uniqueEmail('mig-a')),
      await f.harness.enqueue(uniqueEmail('mig-b')),
      await f.harness.enqueue(uniqueEmail('mig-c')),
    ]
    const jobs = new Map<string, Awaited<ReturnType<typeof f.harness.nextJob>>>()
    for (let i = 0; i < 3; i++) {
      const job = await f.harness.nextJob()
      jobs.set(job.data.messageId, job)
    }
    const requestOf = (messageId: string) => claimRequestOf(jobs.get(messageId)!)
    // One connection, so every call below meets the statement it prepared first.
    const worker = createKnex(f.db.workerUrl, { applicationName: 'test-prepared-migration', max: 1 })
    try {
      expect(await leaseClaimableMessages(worker, [requestOf(a.messageId)], f.now)).to.have.length(1)
      await f.db.owner.raw('ALTER TABLE outbox.security_outbox_messages ALTER COLUMN locale TYPE varchar(35)')
      // In a transaction the refusal aborts it: that call fails, as a failed commit would.
      let refused: unknown
      await worker
        .transaction((trx) => leaseClaimableMessages(trx, [requestOf(c.messageId)], f.now))
        .catch((error: unknown) => (refused = error))
      expect((refused as { code?: string }).code).to.equal('0A000')
      // On its own it is retried under a new name, and every later call uses that name.
      expect((await leaseClaimableMessages(worker, [requestOf(b.messageId)], f.now)).map((row) => row.id)).to.deep.equal([b.messageId])
      const inTransaction = await worker.transaction((trx) => leaseClaimableMessages(trx, [requestOf(c.messageId)], f.now))
      expect(inTransaction.map((row) => row.id)).to.deep.equal([c.messageId])
    } finally {
      await worker.destroy()
    }
  })

  it('names a statement by its text: the same text one name, another text another', () => {
    const name = statementName('SELECT ?::integer AS one')
    expect(name).to.match(/^sealpost_[0-9a-f]{32}_\d+$/)
    expect(statementName('SELECT ?::integer AS one')).to.equal(name)
    expect(statementName('SELECT ?::integer AS uno')).to.not.equal(name)
  })

  /** Every way the plan reads the messages table: its index names, or the scan's node type ("Seq Scan"). */
  const messageReads = (plan: unknown): string[] => {
    const node = plan as { 'Relation Name'?: string; 'Node Type'?: string; 'Index Name'?: string; Plans?: unknown[] }
    // The UPDATE's own node names the table too; it writes the rows its child scan found.
    const reads = node['Relation Name'] === 'security_outbox_messages' && node['Node Type'] !== 'ModifyTable'
    const own = reads ? [node['Index Name'] ?? node['Node Type']!] : []
    return [...own, ...(node.Plans ?? []).flatMap(messageReads)]
  }

  /** The statement's plan for these bindings: as a one-off (custom) statement, and prepared with a generic plan. */
  const plansOf = async (sql: string, bindings: (string[] | number[] | Date)[], types: string) => {
    const db = f.db.owner
    const custom = await db.raw<{ rows: { 'QUERY PLAN': [{ Plan: unknown }] }[] }>(
      `EXPLAIN (FORMAT JSON) ${sql}`,
      bindings as Knex.RawBinding[],
    )
    const positional = db.client.positionBindings(sql) as string
    const generic = await db.transaction(async (trx) => {
      await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan')
      await trx.raw(`PREPARE hot_path_probe (${types}) AS ${positional}`)
      // EXECUTE takes no bind parameters under EXPLAIN: the values as literals (ids, numbers, times).
      const literal = (value: string[] | number[] | Date) => (value instanceof Date ? `'${value.toISOString()}'` : `'{${value.join(',')}}'`)
      const explained = await trx.raw<{ rows: { 'QUERY PLAN': [{ Plan: unknown }] }[] }>(
        `EXPLAIN (FORMAT JSON) EXECUTE hot_path_probe(${bindings.map(literal).join(', ')})`,
      )
      await trx.raw('DEALLOCATE hot_path_probe')
      return explained
    })
    return { custom: messageReads(custom.rows[0]!['QUERY PLAN'][0].Plan), generic: messageReads(generic.rows[0]!['QUERY PLAN'][0].Plan) }
  }

  it('reads the messages by primary key alone when the statistics were taken with none open (a backlog after a quiet spell)', async () => {
    // A quiet spell: every message final when the table was last analyzed.
    await f.harness.enqueueMany(Array.from({ length: 200 }, (_, i) => uniqueEmail(`quiet-${i}`)))
    await f.db.owner.transaction(async (trx) => {
      await trx.raw('DELETE FROM outbox.security_outbox_ciphertexts')
      await trx.raw(`UPDATE outbox.security_outbox_messages SET state = 'dead_lettered', dead_lettered_at = now()`)
    })
    await f.db.owner.raw('ANALYZE outbox.security_outbox_messages, outbox.security_outbox_ciphertexts')
    // Then a backlog the statistics do not know of.
    await f.harness.enqueueMany(Array.from({ length: 600 }, (_, i) => uniqueEmail(`backlog-${i}`)))
    const jobs = await Promise.all(Array.from({ length: 64 }, () => f.harness.nextJob()))
    const leases = jobs.map(claimRequestOf)
    for (const batch of [leases.slice(0, 1), leases]) {
      const ids = batch.map((request) => request.messageId)
      const jobIds = batch.map((request) => request.lease.jobId)
      const retries = batch.map((request) => request.lease.retryCount)
      const claim = await plansOf(
        CLAIM_SQL,
        [ids, jobIds, retries, f.now, f.now, f.now],
        'uuid[], uuid[], integer[], timestamptz, timestamptz, timestamptz',
      )
      const publish = await plansOf(
        PUBLISH_SQL,
        [ids, jobIds, retries, batch.map(() => 'p'), batch.map(() => 1), batch.map(() => 'ses'), batch.map(() => 'email'), f.now, f.now],
        'uuid[], uuid[], integer[], text[], integer[], text[], text[], timestamptz, timestamptz',
      )
      for (const [what, reads] of Object.entries({ claim, publish })) {
        expect(new Set([...reads.custom, ...reads.generic]), `${what} of ${batch.length}`).to.deep.equal(
          new Set(['security_outbox_messages_pkey']),
        )
      }
    }
  })
})
