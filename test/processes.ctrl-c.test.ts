import { rm } from 'node:fs/promises'
import { expect } from 'chai'
import { eventually } from './support/helpers.ts'
import { childPids, embeddedPostgresPid, freshDataDir, isAlive, killGroup, npmStart, stopNpmStart } from './support/npm-start.ts'

describe('npm start and its embedded PostgreSQL', () => {
  let dataDir: string
  before(async () => {
    dataDir = await freshDataDir('sealpost-ctrl-c-')
  })
  after(async () => {
    await rm(dataDir, { recursive: true, force: true })
  })

  it('stops gracefully on Ctrl-C, the database last: no connection is cut by a server shutdown, and the exit is clean', async function () {
    this.timeout(120_000)
    const { app, apiUrl } = await npmStart(dataDir)
    let exitCode: number | null
    try {
      const postgres = await embeddedPostgresPid(dataDir)
      // Some work first, so web, worker and pg-boss hold their connections as in any session.
      const signUp = await fetch(`${apiUrl}/sign-ups`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: `ctrl-c-${Date.now()}@example.com`, password: 'correct horse battery' }),
      })
      expect(signUp.status).to.equal(202)
      await app.waitFor(/"message":"delivery recorded"/, 'the code to be sent')

      // A terminal's Ctrl-C: SIGINT to every process of the foreground job at once.
      killGroup(app, 'SIGINT')
      exitCode = await app.exited
      await eventually(async () => (isAlive(postgres) ? undefined : true), 'the embedded PostgreSQL to stop', 30_000)
    } finally {
      killGroup(app, 'SIGKILL')
    }
    const output = app.output()
    expect(output).to.include('"message":"web stopped"').and.to.include('"message":"worker stopped"')
    // 57P01 is admin_shutdown: what every connection reports when the server stops before its client.
    expect(output).not.to.include('57P01')
    expect(output).not.to.include('terminating connection due to administrator command')
    expect(exitCode, output.slice(-2000)).to.equal(0)
  })

  it('stops the embedded PostgreSQL when the Node process dies without a chance to stop it (SIGKILL)', async function () {
    this.timeout(120_000)
    const { app } = await npmStart(dataDir)
    try {
      const postgres = await embeddedPostgresPid(dataDir)
      const [node] = childPids(app.child.pid!)
      expect(node, 'the Node process under npm').to.be.a('number')
      process.kill(node!, 'SIGKILL')
      await eventually(async () => (isAlive(postgres) ? undefined : true), 'the embedded PostgreSQL to stop', 30_000)
    } finally {
      await stopNpmStart(app, dataDir)
    }
  })
})
