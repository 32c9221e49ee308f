import path from 'node:path'
import { expect } from 'chai'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { spawnCollecting } from './support/processes.ts'

/** test/fixtures/leaks.fixture.ts run by a child mocha whose only root hook is the leak guard. */
describe('the leak guard (test/support/leak-guard.ts)', () => {
  let db: TestDatabase
  let output = ''
  let exitCode: number | null
  before(async function () {
    this.timeout(60_000)
    db = await createTestDatabase()
    const mocha = path.join('node_modules', 'mocha', 'bin', 'mocha.js')
    const run = spawnCollecting(
      process.execPath,
      [
        mocha,
        '--no-config',
        '--require',
        'test/support/leak-guard.ts',
        '--timeout',
        '30000',
        '--reporter',
        'spec',
        // Plain text whatever the environment (CI=true turns mocha's colours on).
        '--no-color',
        'test/fixtures/leaks.fixture.ts',
      ],
      { env: { ...process.env, LEAK_FIXTURE_URL: db.apiUrl } },
    )
    exitCode = await run.exited
    output = run.output()
  })
  after(async () => {
    await db?.drop()
  })

  it('fails exactly the three leaking cases: mocha exits with 3 failures and 6 passing tests', () => {
    expect(exitCode, output).to.equal(3)
    expect(output).to.match(/6 passing/)
    expect(output).to.match(/3 failing/)
  })

  it('names the test that left a knex pool open, the pool and where it was made', () => {
    expect(output).to.include('"after each" hook: leak guard (test) for "opens a pool and never destroys it"')
    expect(output).to.match(
      /"a test that leaks a knex pool opens a pool and never destroys it" left 1 resource\(s\) open:\n\s+- a knex pool \(leaky-pool\) made at /,
    )
  })

  it('names the test that left a started pg-boss instance running', () => {
    expect(output).to.include('"after each" hook: leak guard (test) for "starts pg-boss and never stops it"')
    expect(output).to.match(/left 1 resource\(s\) open:\n\s+- a pg-boss instance .* made at .*leaks\.fixture\.ts/)
  })

  it('lets a before-hook server live until the suite ends, and fails the suite whose after hooks leave it listening', () => {
    expect(output).to.match(
      /the before\/after all hooks of "a suite whose before hook leaks a server" left 1 resource\(s\) open:\n\s+- a server/,
    )
    expect(output).not.to.include('a suite that keeps its before-hook server until its after hook" left')
    expect(output).to.match(/✔ and in the next/)
  })

  it('keeps running the files after a leak, with the leaked resources closed', () => {
    expect(output).to.match(/✔ destroys its pool and closes its server/)
  })
})
