import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { insertOpenMessage } from './support/helpers.ts'

describe('docs/operations.md', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await db?.drop()
  })

  it('every SQL query it documents runs against the real schema', async () => {
    const text = await readFile('docs/operations.md', 'utf8')
    const queries = [...text.matchAll(/```sql\n([\s\S]*?)```/g)].map((match) => match[1]!)
    expect(queries.length).to.be.at.least(6)
    const messageId = await insertOpenMessage(db.owner)
    for (const query of queries) {
      const { rows } = await db.owner.raw(query.replaceAll('00000000-0000-0000-0000-000000000000', messageId).replace(/;\s*$/, ''))
      expect(rows, query.slice(0, 60)).to.be.an('array')
    }
  })
})
