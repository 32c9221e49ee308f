import { execFileSync } from 'node:child_process'
import { copyFile, mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import { relocatedClusterDir } from '../src/db/embedded-root.ts'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

/** This checkout's files (tracked and new, not ignored) copied into `to`; node_modules hard-linked in. */
async function cloneInto(to: string): Promise<void> {
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { encoding: 'utf8' }).split('\0').filter(Boolean)
  for (const file of files) {
    await mkdir(path.join(to, path.dirname(file)), { recursive: true })
    await copyFile(file, path.join(to, file))
  }
  execFileSync('cp', ['-al', 'node_modules', path.join(to, 'node_modules')])
}

// Only root meets this: as root the embedded server runs as `postgres`; anyone else runs it as themselves.
if (process.getuid?.() === 0) {
  describe('npm start as root from a private (0700) directory', () => {
    let privateDir: string
    let checkout: string
    before(async function () {
      this.timeout(120_000)
      privateDir = await mkdtemp(path.join(tmpdir(), 'sealpost-private-'))
      expect((await stat(privateDir)).mode & 0o777).to.equal(0o700)
      checkout = path.join(privateDir, 'sealpost')
      await cloneInto(checkout)
    })
    after(async function () {
      this.timeout(60_000)
      const dataDir = path.join(checkout, '.data')
      const cluster = await relocatedClusterDir(dataDir).catch(() => undefined)
      await rm(privateDir, { recursive: true, force: true })
      if (cluster) await rm(path.dirname(cluster), { recursive: true, force: true })
    })

    it('comes up (the cluster and, if need be, the binaries where the postgres user can reach them), serves, and stops on SIGTERM', async function () {
      this.timeout(180_000)
      const app = spawnCollecting('npm', ['start'], {
        env: bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0' }),
        cwd: checkout,
        detached: true,
      })
      try {
        const [, apiUrl] = await app.waitFor(/Sealpost API on (http:\/\/\S+)/, 'the API to listen', 150_000)
        expect((await fetch(`${apiUrl}/readyz`)).status).to.equal(200)
        // On main: `spawn …/initdb EACCES`, and nothing listened.
        expect(app.output()).to.include('the cluster lives outside it').and.not.include('EACCES')
      } finally {
        try {
          process.kill(-app.child.pid!, 'SIGTERM')
        } catch {
          // already gone; the assertions say why
        }
        await app.exited
      }
      expect(app.output()).to.include('"message":"web stopped"').and.include('"message":"worker stopped"')
    })
  })
}
