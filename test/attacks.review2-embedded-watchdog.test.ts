import { execFileSync } from 'node:child_process'
import { rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:net'
import { expect } from 'chai'
import { eventually } from './support/helpers.ts'
import { freshDataDir, isAlive, killGroup } from './support/npm-start.ts'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

/** Every process whose arguments name the data folder: the watchdog shell and the server it runs. */
function processesOf(dataDir: string): number[] {
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes(`${dataDir}/`) && !line.includes(' ps '))
    .map((line) => Number(line.trim().split(/\s+/)[0]))
    .filter(isAlive)
}

/**
 * `npm start`'s embedded PostgreSQL runs in a process group of its own under a watchdog (docs/getting-started.md
 * "Start it"): a terminal's signals do not reach it, so nothing but Node's own stop or the watchdog
 * may end it. Attacked where Node ends without its graceful stop: a failure while starting after
 * the server is up, and a second Ctrl-C while the first is still waiting for the start.
 */
describe('attack: npm start ends without its graceful stop; no postgres is left (review2)', () => {
  let dataDir: string
  let busy: Server
  let busyPort: number
  before(async () => {
    dataDir = await freshDataDir('sealpost-watchdog-')
    busy = createServer()
    await new Promise<void>((resolve) => busy.listen(0, '0.0.0.0', resolve))
    busyPort = (busy.address() as { port: number }).port
  })
  after(async () => {
    await new Promise<void>((resolve) => busy.close(() => resolve()))
    await rm(dataDir, { recursive: true, force: true })
  })

  it('a port already taken fails the start after the database came up: exit 1, and its server and watchdog are gone', async function () {
    this.timeout(120_000)
    const env = bareEnvironment({ PORT: String(busyPort), SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
    const app = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      let seen = 0
      const code = await Promise.race([
        app.exited,
        (async () => {
          await eventually(async () => ((seen = processesOf(dataDir).length) > 0 ? true : undefined), 'the server to start', 60_000)
          return await app.exited
        })(),
      ])
      expect(code, app.output().slice(-2000)).to.equal(1)
      expect(seen, 'the embedded server had started').to.be.greaterThan(0)
      await eventually(async () => (processesOf(dataDir).length === 0 ? true : undefined), 'no process of the cluster left', 30_000)
    } finally {
      killGroup(app, 'SIGKILL')
    }
  })

  it('a Ctrl-C as the first start creates its cluster (initdb or its first server start) leaves no process, and the next start on that folder serves', async function () {
    this.timeout(180_000)
    const fresh = await freshDataDir('sealpost-watchdog-initdb-')
    const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: fresh })
    try {
      const app = spawnCollecting('npm', ['start'], { env, detached: true })
      try {
        await eventually(
          async () => (processesOf(fresh).length > 0 ? true : undefined),
          'the new cluster’s first process (initdb or its server)',
          60_000,
        )
        killGroup(app, 'SIGINT')
        await app.exited
        await eventually(async () => (processesOf(fresh).length === 0 ? true : undefined), 'no process of the cluster left', 30_000)
      } finally {
        killGroup(app, 'SIGKILL')
      }
      const again = spawnCollecting('npm', ['start'], { env, detached: true })
      try {
        await again.waitFor(/^Try: .*$/m, 'the start banner on the same data folder')
        killGroup(again, 'SIGINT')
        expect(await again.exited, again.output().slice(-2000)).to.equal(0)
      } finally {
        killGroup(again, 'SIGKILL')
      }
    } finally {
      await rm(fresh, { recursive: true, force: true })
    }
  })

  it('a second Ctrl-C while the first waits for the start exits at once, and the server stops with it; the next start serves', async function () {
    this.timeout(180_000)
    const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
    const app = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      await eventually(async () => (processesOf(dataDir).length > 0 ? true : undefined), 'the server to start', 60_000)
      killGroup(app, 'SIGINT')
      // A second press, past the window in which a repeat counts as the same one.
      await new Promise((resolve) => setTimeout(resolve, 1_200))
      killGroup(app, 'SIGINT')
      await app.exited
      expect(app.output(), 'the second press forced the exit').to.include('second signal: exiting now')
      await eventually(async () => (processesOf(dataDir).length === 0 ? true : undefined), 'no process of the cluster left', 30_000)
    } finally {
      killGroup(app, 'SIGKILL')
    }
    const again = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      await again.waitFor(/^Try: .*$/m, 'the start banner on the same data folder')
      killGroup(again, 'SIGINT')
      expect(await again.exited, again.output().slice(-2000)).to.equal(0)
      await eventually(async () => (processesOf(dataDir).length === 0 ? true : undefined), 'no process of the cluster left', 30_000)
    } finally {
      killGroup(again, 'SIGKILL')
    }
  })
})
