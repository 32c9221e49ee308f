import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'

/**
 * The release a rolling upgrade starts from (docs/upgrading.md "The upgrade test"): 0.2.0. The
 * commit id comes first because a clone need not carry tags; the tag is the fallback for a
 * repository rewritten since. When a release is cut, move this to the one before it: the newest
 * CHANGELOG release's "Minimum previous version" (test/docs.release.test.ts compares them).
 */
export const PREVIOUS_RELEASE = Object.freeze({ version: '0.2.0', commit: 'a949653', tag: 'v0.2.0' })

export type PreviousRelease = {
  version: string
  commit: string
  /** The release's tree with its dependencies installed. */
  dir: string
  /** Its Procfile's command for a process type, run in `dir` through sh as a platform would. */
  procfile: (type: 'release' | 'web' | 'worker') => string
  /** PATH with its own node_modules/.bin first: its `node` (the `node` package it pins). */
  path: string
}

function git(args: string[]): Buffer {
  return execFileSync('git', args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 })
}

/** The full commit id of the previous release: its commit, else its tag. */
export function previousReleaseCommit(): string {
  for (const name of [PREVIOUS_RELEASE.commit, PREVIOUS_RELEASE.tag]) {
    try {
      return git(['rev-parse', '--verify', '--quiet', `${name}^{commit}`])
        .toString()
        .trim()
    } catch {
      // The next name, or the error below.
    }
  }
  throw new Error(
    `neither ${PREVIOUS_RELEASE.commit} nor the tag ${PREVIOUS_RELEASE.tag} is in this clone: fetch its history (git fetch --unshallow)`,
  )
}

/**
 * The previous release's tree (git archive) with its dependencies (npm ci), installed once per
 * lock file under the system's temporary directory: a re-run reuses it. When its lock file is
 * byte-for-byte this checkout's, this checkout's node_modules is linked instead of installed.
 */
export async function installPreviousRelease(): Promise<PreviousRelease> {
  const commit = previousReleaseCommit()
  const lock = git(['show', `${commit}:package-lock.json`])
  const key = createHash('sha256').update(lock).digest('hex').slice(0, 16)
  const dir = path.join(tmpdir(), `sealpost-release-${commit.slice(0, 12)}-${key}`)
  const marker = path.join(dir, '.sealpost-installed')
  if (!existsSync(marker) || (await readFile(marker, 'utf8')) !== commit) {
    await rm(dir, { recursive: true, force: true })
    await mkdir(dir, { recursive: true })
    execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${dir}"`], { stdio: ['ignore', 'pipe', 'pipe'] })
    if (existsSync('package-lock.json') && readFileSync('package-lock.json').equals(lock)) {
      await symlink(path.resolve('node_modules'), path.join(dir, 'node_modules'))
    } else {
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 })
    }
    await writeFile(marker, commit)
  }
  const procfile = readFileSync(path.join(dir, 'Procfile'), 'utf8')
  return {
    version: PREVIOUS_RELEASE.version,
    commit,
    dir,
    procfile: (type) => {
      const line = procfile.split('\n').find((entry) => entry.startsWith(`${type}:`))
      if (!line) throw new Error(`the previous release's Procfile has no ${type} entry`)
      return line.slice(type.length + 1).trim()
    },
    path: `${path.join(dir, 'node_modules', '.bin')}${path.delimiter}${process.env.PATH ?? ''}`,
  }
}
