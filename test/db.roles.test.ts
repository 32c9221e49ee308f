import { expect } from 'chai'
import type { Knex } from 'knex'
import * as rolesMigration from '../migrations/20261130000100_roles.ts'
import { API_ROLE, databaseRoles, rewriteRoleNames, WORKER_ROLE } from '../src/db/roles.ts'

describe('the group role names', () => {
  it('are the roles the frozen migration 20261130000100_roles creates', async () => {
    const statements: string[] = []
    await rolesMigration.up({ raw: async (sql: string) => void statements.push(sql) } as unknown as Knex)
    const created = statements.flatMap((sql) => [...sql.matchAll(/CREATE ROLE (\w+) NOLOGIN/g)].map((match) => match[1]))
    expect(created).to.deep.equal([API_ROLE, WORKER_ROLE])
  })
})

describe('role names in migrations', () => {
  const named = databaseRoles({ SEALPOST_API_ROLE: 'u_web', SEALPOST_WORKER_ROLE: 'u_worker' })

  it('map the group roles to the named roles wherever a migration names them', () => {
    const sql = `GRANT SELECT ON outbox.a TO sealpost_api, sealpost_worker; IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sealpost_api')`
    expect(rewriteRoleNames(sql, named)).to.equal(
      `GRANT SELECT ON outbox.a TO u_web, u_worker; IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'u_web')`,
    )
  })

  it('leave longer names alone, and everything when no role is named', () => {
    const sql = 'CREATE ROLE sealpost_api_login IN ROLE sealpost_api; SELECT xsealpost_worker'
    expect(rewriteRoleNames(sql, named)).to.equal('CREATE ROLE sealpost_api_login IN ROLE u_web; SELECT xsealpost_worker')
    expect(rewriteRoleNames(sql, databaseRoles({}))).to.equal(sql)
    expect(databaseRoles({})).to.deep.equal({ api: 'sealpost_api', worker: 'sealpost_worker', named: false })
  })
})
