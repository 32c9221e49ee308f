import net from 'node:net'
import knex from 'knex'
import Mocha from 'mocha'
import { PgBoss } from 'pg-boss'

/**
 * The leaked-resource guard (after graphile-worker's leaked-worker check): every pg-boss instance
 * started, knex pool opened and server listening in this process is tracked from the moment it is
 * created, with the test or hook that created it. A resource made by a test, or by a before/after
 * each hook, must be released by the time that test's afterEach hooks are done; one made by a
 * before/after all hook may live until its suite's after-all hooks are done. Whatever is still
 * open then fails a hook named after the test (or suite) with what leaked and where it was made,
 * and is closed by the guard so that the rest of the run is not affected by it.
 *
 * It watches the classes rather than our helpers, so a pool a test opens itself counts as much
 * as one of the harness's: pg-boss's `start`/`stopped`, knex's client pool (`initializePool`/
 * `destroy`, the pool every knex instance with a connection owns) and `net.Server#listen` (every
 * HTTP server, express's `app.listen` included).
 */

type Kind = 'pg-boss instance' | 'knex pool' | 'server'
type Owner = { test: Mocha.Runnable } | { suite: Mocha.Suite } | { run: true }
type Resource = { kind: Kind; what: string; createdAt: string; owner: Owner; isOpen: () => boolean; release: () => Promise<void> }

const open = new Set<Resource>()
let current: Mocha.Runnable | undefined
let installed = false

/** The first stack frame in our own code: where the leaked resource was made. */
function callSite(): string {
  const frames = (new Error().stack ?? '').split('\n').slice(1)
  const mine = (frame: string) => !frame.includes('node_modules') && !frame.includes('node:') && !frame.includes('leak-guard.ts')
  // The test or helper that asked for it says more than createKnex or startWeb would.
  const ours = frames.find((frame) => mine(frame) && frame.includes('/test/')) ?? frames.find(mine)
  return (ours ?? frames[0] ?? '').trim().replace(/^at /, '').replace(`file://${process.cwd()}/`, '').replace(`${process.cwd()}/`, '')
}

/** Test-scoped unless made by a before/after all hook (then the hook's suite); outside any runnable, the whole run. */
function ownerNow(): Owner {
  if (!current) return { run: true }
  const isHook = (current as { type?: string }).type === 'hook'
  if (isHook && /^"(before|after) all" hook/.test(current.title)) return { suite: current.parent! }
  if (isHook) return current.ctx?.currentTest ? { test: current.ctx.currentTest } : { suite: current.parent! }
  return { test: current }
}

function track(resource: Omit<Resource, 'owner' | 'createdAt'>): Resource {
  const tracked = { ...resource, owner: ownerNow(), createdAt: callSite() }
  open.add(tracked)
  return tracked
}

function install(): void {
  if (installed) return
  installed = true

  // Each original method is kept to be called on the same object with .apply(this): never unbound.
  /* eslint-disable @typescript-eslint/unbound-method */
  const runnable = Mocha.Runnable.prototype as unknown as { run: (this: Mocha.Runnable, fn: unknown) => unknown }
  const run = runnable.run
  runnable.run = function (this: Mocha.Runnable, fn: unknown) {
    // Remembered, not aliased: whatever is created from now on belongs to this test or hook.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    current = this
    return run.call(this, fn)
  }

  const start = PgBoss.prototype.start
  PgBoss.prototype.start = function (this: PgBoss, ...args: Parameters<PgBoss['start']>) {
    if (!trackedBosses.has(this)) {
      const options = (this as unknown as { config?: { application_name?: string } }).config
      const resource = track({
        kind: 'pg-boss instance',
        what: options?.application_name ?? 'pg-boss',
        isOpen: () => trackedBosses.has(this),
        release: async () => {
          await this.stop({ graceful: false, timeout: 1_000 }).catch(() => undefined)
        },
      })
      trackedBosses.set(this, resource)
      this.once('stopped', () => {
        trackedBosses.delete(this)
        open.delete(resource)
      })
    }
    return start.apply(this, args)
  }

  type KnexClient = {
    pool?: unknown
    config?: { connection?: { application_name?: string } }
    initializePool: (...args: unknown[]) => unknown
    destroy: (...args: unknown[]) => Promise<unknown>
  }
  const client = (knex as unknown as { Client: { prototype: KnexClient } }).Client.prototype
  const initializePool = client.initializePool
  client.initializePool = function (this: KnexClient, ...args: unknown[]) {
    const result = initializePool.apply(this, args)
    if (this.pool && !trackedPools.has(this)) {
      trackedPools.set(
        this,
        track({
          kind: 'knex pool',
          what: this.config?.connection?.application_name ?? 'knex',
          isOpen: () => this.pool !== undefined,
          release: async () => {
            await this.destroy()
          },
        }),
      )
    }
    return result
  }
  const destroy = client.destroy
  client.destroy = function (this: KnexClient, ...args: unknown[]) {
    const resource = trackedPools.get(this)
    if (resource) {
      trackedPools.delete(this)
      open.delete(resource)
    }
    return destroy.apply(this, args)
  }

  const listen = net.Server.prototype.listen
  net.Server.prototype.listen = function (this: net.Server, ...args: unknown[]) {
    if (!trackedServers.has(this)) {
      const resource = track({
        kind: 'server',
        what: this.constructor.name,
        isOpen: () => this.listening,
        release: () =>
          new Promise<void>((resolve) => {
            ;(this as { closeAllConnections?: () => void }).closeAllConnections?.()
            this.close(() => resolve())
          }),
      })
      trackedServers.set(this, resource)
      this.once('close', () => {
        trackedServers.delete(this)
        open.delete(resource)
      })
    }
    return listen.apply(this, args as Parameters<net.Server['listen']>)
  } as net.Server['listen']
  /* eslint-enable @typescript-eslint/unbound-method */
}

const trackedBosses = new Map<PgBoss, Resource>()
const trackedPools = new Map<object, Resource>()
const trackedServers = new Map<net.Server, Resource>()

/** Releases and reports what `belongs` selects and is still open (a closed server may not have said 'close' yet). */
async function sweep(belongs: (owner: Owner) => boolean, scope: string): Promise<void> {
  const leaked = [...open].filter((resource) => belongs(resource.owner))
  for (const resource of leaked) open.delete(resource)
  const stillOpen = leaked.filter((resource) => resource.isOpen())
  await Promise.all(stillOpen.map((resource) => resource.release().catch(() => undefined)))
  if (stillOpen.length === 0) return
  const lines = stillOpen.map((resource) => `  - a ${resource.kind} (${resource.what}) made at ${resource.createdAt}`)
  throw new Error(`leak guard: ${scope} left ${stillOpen.length} resource(s) open:\n${lines.join('\n')}`)
}

/** Test-scoped resources: checked after every afterEach hook of the test, on the file's top-level suite. */
function checkTest(test: Mocha.Runnable | undefined): Promise<void> {
  return sweep((owner) => 'test' in owner && (owner.test === test || !test), `"${test?.fullTitle() ?? 'a test'}"`)
}

/** Appends the guard's hooks to every suite: after-each on each file's top-level suite, after-all everywhere. */
function attach(suite: Mocha.Suite, topLevel: boolean): void {
  if (topLevel)
    suite.afterEach('leak guard (test)', function (this: Mocha.Context) {
      return checkTest(this.currentTest)
    })
  suite.afterAll('leak guard (suite)', function () {
    return sweep((owner) => 'suite' in owner && owner.suite === suite, `the before/after all hooks of "${suite.fullTitle()}"`)
  })
  for (const child of suite.suites) attach(child, false)
}

/**
 * Root hooks: install the trackers, attach the per-suite checks once every file is loaded, and check
 * what the run itself made (the cluster) at the very end. An after-each failure is reported by mocha
 * as `"after each" hook: leak guard (test) for "<test>"` and ends that file's top-level suite.
 */
function attachToEveryFile(this: Mocha.Context): void {
  install()
  for (const suite of this.test?.parent?.suites ?? []) attach(suite, true)
}

export const leakGuardHooks = { beforeAll: attachToEveryFile, afterAll: () => sweep(() => true, 'the run') }

install()

export const mochaHooks = leakGuardHooks
