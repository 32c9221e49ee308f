import { expect } from 'chai'
import type { Knex } from 'knex'
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { createKnex } from '../src/db/knex.ts'
import { MIGRATION_CONFIG, migrationSource } from '../src/db/migrations.ts'
import { testCluster } from './support/root-hooks.ts'

const SCHEMAS = ['identity', 'organization', 'outbox', 'platform']

/**
 * Everything the migrations define in our schemas, as sorted text: tables and columns, constraints,
 * indexes, functions, triggers, policies, views and the privileges granted on each object.
 */
async function catalog(db: Knex): Promise<string[]> {
  const queries = [
    `SELECT format('column %s.%s.%s %s %s default %s', table_schema, table_name, column_name, data_type, is_nullable, coalesce(column_default, '-'))
       FROM information_schema.columns WHERE table_schema = ANY (?)`,
    `SELECT format('constraint %s %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
       FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = ANY (?)`,
    `SELECT format('index %s', indexdef) FROM pg_indexes WHERE schemaname = ANY (?)`,
    `SELECT format('function %s', pg_get_functiondef(p.oid)) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ANY (?)`,
    `SELECT format('trigger %s', pg_get_triggerdef(t.oid)) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ANY (?) AND NOT t.tgisinternal`,
    `SELECT format('policy %s.%s %s %s %s %s', schemaname, tablename, policyname, roles, qual, with_check) FROM pg_policies WHERE schemaname = ANY (?)`,
    `SELECT format('acl %s %s %s', c.relkind, c.oid::regclass, c.relacl) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ANY (?)`,
    `SELECT format('column acl %s.%s %s', c.oid::regclass, a.attname, a.attacl) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ANY (?) AND a.attacl IS NOT NULL`,
    `SELECT format('function acl %s %s', p.oid::regprocedure, p.proacl) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ANY (?)`,
    `SELECT format('schema %s %s', nspname, nspacl) FROM pg_namespace WHERE nspname = ANY (?)`,
  ]
  const lines: string[] = []
  for (const query of queries) {
    const { rows } = await db.raw<{ rows: { format: string }[] }>(query, [SCHEMAS])
    lines.push(...rows.map((row) => row.format))
  }
  return lines.sort()
}

/** Migrations are history: a fresh install equals an upgrade, and every `down` runs. */
describe('migrations as history', () => {
  const databases: string[] = []
  const opened: Knex[] = []
  async function freshDatabase(): Promise<Knex> {
    const name = `sealpost_migrations_${randomBytes(5).toString('hex')}`
    const admin = new pg.Client({ connectionString: testCluster().ownerUrl('postgres') })
    await admin.connect()
    try {
      await admin.query(`CREATE DATABASE ${name}`)
    } finally {
      await admin.end()
    }
    databases.push(name)
    const db = createKnex(testCluster().ownerUrl(name), { applicationName: 'sealpost-test-migrations', max: 2 })
    opened.push(db)
    return db
  }
  // Each test's pools and databases go when it ends (the leak guard holds a test to what it opened).
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.destroy()))
    const admin = new pg.Client({ connectionString: testCluster().ownerUrl('postgres') })
    await admin.connect()
    try {
      for (const name of databases.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await admin.end()
    }
  })

  it('builds the same schema migrated at once as migrated one release at a time, and again after every down ran', async function () {
    this.timeout(120_000)
    const atOnce = await freshDatabase()
    await atOnce.migrate.latest(MIGRATION_CONFIG)
    const stepwise = await freshDatabase()
    const names = await migrationSource.getMigrations([])
    for (let step = 0; step < names.length; step++) await stepwise.migrate.up(MIGRATION_CONFIG)
    const [, pending] = (await stepwise.migrate.list(MIGRATION_CONFIG)) as [unknown[], unknown[]]
    expect(pending, 'nothing left to apply').to.have.length(0)

    const expected = await catalog(atOnce)
    expect(expected.length, 'the dump sees the schema').to.be.greaterThan(200)
    expect(await catalog(stepwise)).to.deep.equal(expected)

    // Every down runs, newest first, and leaves none of our objects behind; then the whole history again.
    for (let step = 0; step < names.length; step++) await stepwise.migrate.down(MIGRATION_CONFIG)
    const { rows } = await stepwise.raw<{ rows: unknown[] }>('SELECT nspname FROM pg_namespace WHERE nspname = ANY (?)', [SCHEMAS])
    expect(rows, 'schemas left after rolling back to zero').to.have.length(0)
    await stepwise.migrate.latest(MIGRATION_CONFIG)
    expect(await catalog(stepwise)).to.deep.equal(expected)
  })
})
