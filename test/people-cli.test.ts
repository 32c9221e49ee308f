import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { singleKeyRing } from '../src/crypto/key-ring.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { createVerifiedIdentity, ringSetting, uniqueEmail } from './support/helpers.ts'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

describe('npm run people', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })
  const people = async (...args: string[]) => {
    const run = spawnCollecting(process.execPath, ['src/bin/people.ts', ...args], {
      env: bareEnvironment({
        NODE_ENV: 'development',
        DATABASE_URL: db.ownerUrl,
        CODE_HASH_KEYS: ringSetting(singleKeyRing(randomBytes(32))),
        OUTBOX_ENCRYPTION_KEYS: ringSetting(singleKeyRing(randomBytes(32))),
      }),
    })
    return { code: await run.exited, output: run.output() }
  }

  it('exports and then erases a person as the owner, each audited with the operator as the actor', async () => {
    const email = uniqueEmail('cli-person')
    const { identityId } = await createVerifiedIdentity(db.owner, email)

    const exported = await people('export', email)
    expect(exported.code, exported.output).to.equal(0)
    expect(exported.output).to.include(identityId).and.include(email).and.include('"identifiers"')

    const erased = await people('erase', email)
    expect(erased.code, erased.output).to.equal(0)
    const tombstoneId = /"tombstoneId": "([0-9a-f-]{36})"/.exec(erased.output)![1]!
    expect(await db.owner('identity.identities').where({ id: identityId })).to.have.length(0)
    expect(await db.owner('identity.login_identifiers').where({ value: email })).to.have.length(0)
    const trail = await db.owner('platform.audit_records').where({ subject: tombstoneId }).orderBy('at')
    expect(trail.map((row) => row.action)).to.deep.equal(['identity.exported', 'identity.erased'])
    for (const row of trail) expect(row.actor).to.match(/^cli:/)

    expect(await people('erase', email)).to.include({ code: 1 })
    expect((await people('forget', email)).code).to.equal(2)
  })
})
