import { execFileSync } from 'node:child_process'
import { chmod, mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { eventually } from './helpers.ts'
import { bareEnvironment, spawnCollecting, type Spawned } from './processes.ts'

/** A data folder like a fresh clone's `.data/` (mkdtemp's 0700 would shut out the `postgres` user PostgreSQL runs as under root). */
export async function freshDataDir(prefix: string): Promise<string> {
  const dataDir = await mkdtemp(path.join(tmpdir(), prefix))
  await chmod(dataDir, 0o755)
  return dataDir
}

export type NpmStart = { app: Spawned; env: NodeJS.ProcessEnv; apiUrl: string; inboxUrl: string }

/**
 * `npm start` as a newcomer's terminal runs it: the foreground job, a process group of its own
 * (npm and the Node under it), on free ports, keeping everything in `dataDir`.
 */
export async function npmStart(dataDir: string): Promise<NpmStart> {
  const env = bareEnvironment({ PORT: '0', SES_EMULATOR_PORT: '0', SEALPOST_DATA_DIR: dataDir })
  const app = spawnCollecting('npm', ['start'], { env, detached: true })
  try {
    await app.waitFor(/^Try: .*$/m, 'the start banner')
    const [, apiUrl] = /Sealpost API on (http:\/\/\S+)/.exec(app.output())!
    const [, inboxUrl] = /SES emulator inbox viewer on (http:\/\/\S+)/.exec(app.output())!
    return { app, env, apiUrl: apiUrl!, inboxUrl: inboxUrl! }
  } catch (error) {
    killGroup(app, 'SIGKILL')
    throw error
  }
}

/** A signal to the whole process group: SIGINT is what a terminal's Ctrl-C sends to its foreground job. */
export function killGroup(app: Spawned, signal: NodeJS.Signals): void {
  try {
    process.kill(-app.child.pid!, signal)
  } catch {
    // the group is gone already
  }
}

/** The postmaster's pid, from the cluster's postmaster.pid wherever `npm start` keeps the cluster. */
export async function embeddedPostgresPid(dataDir: string): Promise<number> {
  const runtime = JSON.parse(await readFile(path.join(dataDir, 'runtime.json'), 'utf8')) as { databaseUrl: string }
  const port = new URL(runtime.databaseUrl).port
  const lines = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n')
  // The server itself, not the watchdog shell that names it among its arguments.
  const line = lines.find((entry) => /^\s*\d+\s+\S*\/postgres\s/.test(entry) && entry.includes(` -p ${port} `))
  if (!line) throw new Error(`no postgres process on port ${port}`)
  return Number(line.trim().split(/\s+/)[0])
}

/** Running, not merely a zombie nobody reaped (an orphan's parent here may be a container's init). */
export function isAlive(pid: number): boolean {
  try {
    const state = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    return !state.trim().startsWith('Z')
  } catch {
    return false // ps exits 1 when no such process
  }
}

/** The pids of a process's children. */
export function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.trim())
      .map(Number)
  } catch {
    return [] // ps exits 1 when there is none
  }
}

/**
 * Kills `npm start` (SIGKILL to its group) and waits for its embedded PostgreSQL too: the server
 * runs in a process group of its own and stops on its watchdog's word a moment after Node, so a
 * data folder removed before then meets a server still writing into it (ENOTEMPTY).
 */
export async function stopNpmStart(app: Spawned, dataDir: string): Promise<void> {
  const postgres = await embeddedPostgresPid(dataDir).catch(() => undefined)
  killGroup(app, 'SIGKILL')
  await app.exited
  if (postgres !== undefined)
    await eventually(async () => (isAlive(postgres) ? undefined : true), 'the embedded PostgreSQL to stop', 30_000)
}
