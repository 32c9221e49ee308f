import { randomUUID } from 'node:crypto'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { expect } from 'chai'
import { ConfigError } from '../config/schema.ts'
import { describeCliFailure } from '../src/bin/cli-failure.ts'
import { freePort } from '../src/db/embedded.ts'
import { createTestDatabase, type TestDatabase } from './support/database.ts'
import { uniqueEmail } from './support/helpers.ts'
import { freshDataDir } from './support/npm-start.ts'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

/** A helper as someone types it: `npm run --silent <script> -- <args>`; its exit code and every line it printed. */
async function helper(env: Record<string, string>, script: string, ...args: string[]): Promise<{ code: number | null; lines: string[] }> {
  const run = spawnCollecting('npm', ['run', '--silent', script, '--', ...args], { env: bareEnvironment(env) })
  const code = await run.exited
  return { code, lines: run.output().trim().split('\n') }
}

/** One line, no stack trace, a non-zero exit. */
function expectOneLine(result: { code: number | null; lines: string[] }, what: string): string {
  expect(result.code, `${what}: ${result.lines.join('\n')}`).to.equal(1)
  expect(result.lines, `${what} prints one line`).to.have.length(1)
  expect(result.lines[0], `${what}: no stack trace`).not.to.match(/^\s+at |Error: /)
  return result.lines[0]!
}

const DATABASE_HELPERS: [string, ...string[]][] = [
  ['staff', 'grant', 'someone@example.com'],
  ['people', 'export', 'someone@example.com'],
  ['dev:identity', 'someone@example.com'],
  ['dev:message', 'someone@example.com'],
  ['dev:ses-event', 'bounce', '01939a3e-0000-7000-8000-000000000000'],
]

describe('a developer helper that fails says what went wrong and what to do, in one line', function () {
  this.timeout(120_000)
  let dataDir: string
  let db: TestDatabase
  before(async () => {
    dataDir = await freshDataDir('sealpost-helpers-')
    db = await createTestDatabase()
  })
  after(async () => {
    await rm(dataDir, { recursive: true, force: true })
    await db?.drop()
  })

  it('before any `npm start` ran on the data folder: start it there, or set DATABASE_URL', async () => {
    for (const [script, ...args] of DATABASE_HELPERS) {
      const line = expectOneLine(await helper({ SEALPOST_DATA_DIR: dataDir }, script, ...args), script)
      expect(line).to.include(`${script}: `).and.include('npm start').and.include(dataDir).and.include('DATABASE_URL')
    }
  })

  it('after `npm start` stopped (its runtime.json left behind): nothing answers, start it again', async () => {
    const stale = `postgres://postgres:not-this-password@127.0.0.1:${await freePort()}/sealpost`
    await writeFile(path.join(dataDir, 'runtime.json'), JSON.stringify({ databaseUrl: stale }))
    for (const [script, ...args] of DATABASE_HELPERS) {
      const line = expectOneLine(await helper({ SEALPOST_DATA_DIR: dataDir }, script, ...args), script)
      expect(line).to.include('ECONNREFUSED').and.include('npm start').and.not.include('not-this-password')
    }
  })

  it('when what it names is not there: no identity, no published message', async () => {
    const env = { SEALPOST_DATA_DIR: dataDir, DATABASE_URL: db.ownerUrl }
    const unknown = uniqueEmail('nobody')
    expect(expectOneLine(await helper(env, 'staff', 'grant', unknown), 'staff')).to.include('sign up with it')
    expect(expectOneLine(await helper(env, 'people', 'export', unknown), 'people')).to.include('no identity')
    expect(expectOneLine(await helper(env, 'dev:message', unknown), 'dev:message')).to.include('no published message')
    expect(expectOneLine(await helper(env, 'dev:ses-event', 'bounce', randomUUID()), 'dev:ses-event')).to.include('no published attempt')
  })

  it('with an invalid setting: names the variable, never its value', async () => {
    const line = expectOneLine(await helper({ SEALPOST_DATA_DIR: dataDir, LOG_LEVEL: 'chatty' }, 'preview', dataDir), 'preview')
    expect(line).to.match(/^preview: invalid configuration: LOG_LEVEL/)
    expect(line).not.to.include('chatty')
  })
})

describe('describeCliFailure', () => {
  const options = { safe: false, dataDir: '.data' }
  const withCode = (code: string, message = 'boom') => Object.assign(new Error(message), { code })

  it('reads a refused connection from the cause fetch puts it in', () => {
    const refused = new TypeError('fetch failed', { cause: withCode('ECONNREFUSED') })
    expect(describeCliFailure(refused, options)).to.match(/^nothing answers .*\(ECONNREFUSED\): is `npm start` running on \.data\?/)
  })

  it('tells a refused login and a missing database apart from an unreachable server', () => {
    expect(describeCliFailure(withCode('28P01'), options)).to.match(/^the database refused the login \(28P01\)/)
    expect(describeCliFailure(withCode('3D000'), options)).to.match(/^the database is not there \(3D000\)/)
  })

  it('prints only the name and code of an error it did not write, never its message', () => {
    const line = describeCliFailure(withCode('XX000', 'password=hunter2 in postgres://u:hunter2@h/db'), options)
    expect(line).to.equal('unexpected failure (Error XX000); please report this line with the command you ran')
  })

  it('joins the problems of a configuration error into one line', () => {
    const error = new ConfigError([
      { variable: 'A', problem: 'is wrong' },
      { variable: 'B', problem: 'is missing' },
    ])
    expect(describeCliFailure(error, { ...options, safe: true })).to.equal('invalid configuration: A: is wrong; B: is missing')
  })
})
