import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import type { Keys } from '../../src/runtime/dev-keys.ts'

/** A child process whose output is collected; `waitFor` resolves on the first matching line. */
export type Spawned = {
  child: ChildProcess
  output: () => string
  waitFor: (pattern: RegExp, what: string, timeoutMs?: number) => Promise<RegExpMatchArray>
  exited: Promise<number | null>
}

export function spawnCollecting(
  command: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; cwd?: string; detached?: boolean },
): Spawned {
  const child = spawn(command, args, {
    env: options.env,
    cwd: options.cwd ?? process.cwd(),
    detached: options.detached ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  const listeners = new Set<() => void>()
  const append = (chunk: Buffer) => {
    text += chunk.toString('utf8')
    for (const listener of listeners) listener()
  }
  child.stdout.on('data', append)
  child.stderr.on('data', append)
  // 'close' waits for every holder of the pipes (npm's node child too) to finish.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  return {
    child,
    output: () => text,
    exited,
    waitFor(pattern, what, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(text)
          if (match) {
            cleanup()
            resolve(match)
          }
        }
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`timed out waiting for ${what}; output so far:\n${text.slice(-2000)}`))
        }, timeoutMs)
        const onExit = () => {
          cleanup()
          reject(new Error(`process exited before ${what}; output:\n${text.slice(-2000)}`))
        }
        const cleanup = () => {
          clearTimeout(timer)
          listeners.delete(check)
          child.off('close', onExit)
        }
        listeners.add(check)
        child.on('close', onExit)
        check()
      })
    },
  }
}

/** The environment of a machine with nothing configured: PATH and HOME only. */
export function bareEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  // Under `c8` (npm test, npm run coverage) the children write their coverage where the run's goes.
  const coverage = process.env.NODE_V8_COVERAGE ? { NODE_V8_COVERAGE: process.env.NODE_V8_COVERAGE } : {}
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...coverage, ...extra }
}

/**
 * The PATH of a terminal outside npm: without any node_modules/.bin (npx and npm run put the
 * project's Node 22 first there), so `node` is the machine's own, as a reader's shell has it
 * (Node 20 on the machines here).
 */
export function terminalPath(): string {
  return (process.env.PATH ?? '')
    .split(':')
    .filter((entry) => !entry.split('/').includes('node_modules'))
    .join(':')
}

/** The Procfile's command for a process type, run through sh as a platform would. */
export function procfileCommand(type: string): string {
  const line = readFileSync('Procfile', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(`${type}:`))
  if (!line) throw new Error(`Procfile has no ${type} entry`)
  return line.slice(type.length + 1).trim()
}

/** A production environment for the Procfile processes against a test database and local fakes. */
export function productionEnvironment(options: {
  apiUrl: string
  workerUrl: string
  keys: Keys
  sesEndpoint: string
  wasenderUrl: string
  wasenderKey: string
  extra?: Record<string, string>
}): NodeJS.ProcessEnv {
  return bareEnvironment({
    NODE_ENV: 'production',
    PORT: '0',
    API_DATABASE_URL: options.apiUrl,
    WORKER_DATABASE_URL: options.workerUrl,
    OUTBOX_ENCRYPTION_KEYS: options.keys.outboxKey.map(({ id, key }) => `${id}:${key.toString('base64')}`).join(','),
    CODE_HASH_KEYS: options.keys.codeHashKeys.map((key, index) => `${index}:${key.toString('base64')}`).join(','),
    SES_REGION: 'us-east-1',
    SES_FROM_ADDRESS: 'no-reply@sealpost.test',
    SES_ENDPOINT: options.sesEndpoint,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    WASENDER_API_URL: options.wasenderUrl,
    WASENDER_API_KEY: options.wasenderKey,
    INVITATION_LINK_BASE_URL: 'https://app.sealpost.test',
    ...options.extra,
  })
}

/** A worker process exactly as the Procfile starts it. */
export function spawnWorker(env: NodeJS.ProcessEnv): Spawned {
  return spawnCollecting('sh', ['-c', procfileCommand('worker')], { env })
}

/** SIGTERM to every process still running, then waits until each has exited (a test's after hook). */
export async function stopAll(spawned: readonly Spawned[]): Promise<void> {
  for (const process of spawned) {
    if (process.child.exitCode === null && process.child.signalCode === null) process.child.kill('SIGTERM')
    await process.exited
  }
}
