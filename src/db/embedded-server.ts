import { spawn, type ChildProcess } from 'node:child_process'
import type { Ids } from './embedded-root.ts'

/**
 * The watchdog the server runs under (POSIX sh). It keeps Node's pipe as fd 3 (an asynchronous
 * list's stdin is /dev/null), starts the server, and stops it with a fast shutdown (SIGINT) once
 * that pipe reaches end of file: Node closed it to stop the server, or Node is gone, however it
 * died (the kernel closes a dead process's pipes). It exits with the server.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$@" </dev/null 3<&- &',
  'server=$!',
  '{ read -r _ <&3; kill -INT "$server"; } 2>/dev/null &',
  'watchdog=$!',
  'exec 3<&-',
  'wait "$server"',
  'status=$?',
  'kill "$watchdog" 2>/dev/null',
  'exit "$status"',
].join('\n')

const READY = 'database system is ready to accept connections'

/** A running postgres server of the embedded cluster. */
export type ServerProcess = { stop: () => Promise<void> }

/**
 * Starts `postgres` in a process group of its own (`detached`): a terminal's Ctrl-C goes to the
 * foreground group, which is npm and Node only, so the graceful stop runs against a live database
 * and stops this server last (docs/getting-started.md "Start it"). Resolves once the server accepts
 * connections; rejects if it exits first.
 */
export async function startServerProcess(options: {
  postgres: string
  args: string[]
  /** As root, the `postgres` system user it must run as (PostgreSQL refuses root). */
  ids?: Ids
  onLog: (line: string) => void
}): Promise<ServerProcess> {
  const child = spawn('sh', ['-c', WATCHDOG, 'sealpost-embedded-postgres', options.postgres, ...options.args], {
    ...options.ids,
    detached: true,
    stdio: ['pipe', 'ignore', 'pipe'],
    // English server messages: READY is matched in the server's own words.
    env: { ...process.env, LC_MESSAGES: 'C' },
  })
  // A server that died on its own has closed the pipe; ending it then must not throw.
  child.stdin.on('error', () => undefined)
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    let tail = ''
    child.stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8')
      options.onLog(text)
      // The line may arrive split over two chunks.
      const seen = tail + text
      if (seen.includes(READY)) resolve()
      tail = seen.slice(-READY.length)
    })
    child.once('error', reject)
    void exited.then(() => reject(new Error('the embedded postgres server exited while starting')))
  }).catch(async (error: unknown) => {
    if (child.pid !== undefined) await stopProcess(child, exited)
    throw error
  })
  return { stop: () => stopProcess(child, exited) }
}

async function stopProcess(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.stdin?.end()
  await exited
}
