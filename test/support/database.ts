import { randomBytes } from 'node:crypto'
import type { Knex } from 'knex'
import pg from 'pg'
import { createKnex } from '../../src/db/knex.ts'
import { asLogin, TEMPLATE_DATABASE } from './cluster.ts'
import { testCluster } from './root-hooks.ts'

/** A database of its own for one test file, copied from the migrated template. */
export type TestDatabase = {
  name: string
  ownerUrl: string
  apiUrl: string
  workerUrl: string
  /** Owner connection for arranging rows and inspecting results. */
  owner: Knex
  drop: () => Promise<void>
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const cluster = testCluster()
  const name = `sealpost_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: cluster.ownerUrl('postgres') })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DATABASE}`)
  } finally {
    await admin.end()
  }
  const ownerUrl = cluster.ownerUrl(name)
  const owner = createKnex(ownerUrl, { applicationName: 'sealpost-test-owner', max: 4 })
  return {
    name,
    ownerUrl,
    apiUrl: asLogin(ownerUrl, cluster.logins.api),
    workerUrl: asLogin(ownerUrl, cluster.logins.worker),
    owner,
    async drop() {
      await owner.destroy()
      const client = new pg.Client({ connectionString: cluster.ownerUrl('postgres') })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    },
  }
}
