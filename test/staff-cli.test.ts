import { expect } from 'chai'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { createVerifiedIdentity, uniqueEmail } from './support/helpers.ts'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

describe('npm run staff', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })
  const staff = async (...args: string[]) => {
    const run = spawnCollecting(process.execPath, ['src/bin/staff.ts', ...args], {
      env: bareEnvironment({ NODE_ENV: 'development', DATABASE_URL: db.ownerUrl }),
    })
    return { code: await run.exited, output: run.output() }
  }

  it('grants and revokes staff by verified identifier, audited, and says when there is nothing to do', async () => {
    const email = uniqueEmail('operator')
    const { identityId } = await createVerifiedIdentity(db.owner, email)
    expect(await staff('grant', email)).to.include({ code: 0 })
    expect(await db.owner('platform.staff_members').where({ identity_id: identityId }).first()).to.include({ revoked_at: null })
    expect((await staff('grant', email)).output).to.include('nothing to grant')
    expect(await staff('revoke', email)).to.include({ code: 0 })
    expect((await db.owner('platform.staff_members').where({ identity_id: identityId }).first()).revoked_at).to.be.instanceOf(Date)
    const audit = await db.owner('platform.audit_records').where({ subject: identityId }).orderBy('at')
    expect(audit.map((row) => row.action)).to.deep.equal(['staff.grant', 'staff.revoke'])
    expect(audit[0].actor).to.match(/^cli:/)
    expect(JSON.stringify(audit)).not.to.include(email)
    expect(await staff('grant', uniqueEmail('unknown'))).to.include({ code: 1 })
    expect((await staff('promote', email)).code).to.equal(2)
  })
})
