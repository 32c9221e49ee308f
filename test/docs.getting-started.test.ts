import { spawn } from 'node:child_process'
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { expect } from 'chai'
import { bareEnvironment, spawnCollecting } from './support/processes.ts'

/** The shell blocks of a page, in order: what a reader pastes into one terminal. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!)
}

function runBash(script: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    const bash = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    bash.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    bash.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
    bash.on('close', (status) => resolve({ status, output }))
  })
}

describe('docs/getting-started.md, run as written against a fresh npm start', () => {
  let dataDir: string
  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'sealpost-walkthrough-'))
    // Like a fresh clone's folder (mkdtemp's 0700 would shut out the `postgres` user PostgreSQL runs as under root).
    await chmod(dataDir, 0o755)
  })
  after(async () => {
    await rm(dataDir, { recursive: true, force: true })
  })

  it('every step answers the status the page says, from sign-up to the reissue of a dead letter', async function () {
    this.timeout(180_000)
    const blocks = shellBlocks(await readFile('docs/getting-started.md', 'utf8'))
    expect(blocks.length, 'the walkthrough has its steps').to.be.greaterThan(10)
    const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
    const app = spawnCollecting('npm', ['start'], { env, detached: true })
    try {
      const [, api] = await app.waitFor(/Sealpost API on (http:\/\/\S+)/, 'the API to listen')
      const [, inbox] = await app.waitFor(/SES emulator inbox viewer on (http:\/\/\S+)/, 'the inbox viewer')
      // One shell, every block in order, stopping at the first command that fails (a `call` with another status).
      const script = ['set -euo pipefail', ...blocks].join('\n')
      const { status, output } = await runBash(script, { ...env, API: api, INBOX: inbox })
      expect(status, output.slice(-3000)).to.equal(0)
      expect(output)
        .to.include('POST /platform-admin/security-outbox/dead-letters/')
        .and.to.match(/reissues → 201/)
      expect(output).to.include('POST /password-recoveries/completion → 204')
    } finally {
      try {
        process.kill(-app.child.pid!, 'SIGTERM')
      } catch {
        // already gone
      }
      await app.exited
    }
  })
})
