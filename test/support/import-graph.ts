import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'

/** The repository's root: every path below is relative to it, with forward slashes. */
export const ROOT = path.resolve(import.meta.dirname, '../..')

const rel = (file: string) => path.relative(ROOT, file).split(path.sep).join('/')

/** The TypeScript files below a directory of the repository, as `dir/…/name.ts`. */
export function tsFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
    const full = path.join(ROOT, dir, name)
    if (statSync(full).isDirectory()) return tsFiles(`${dir}/${name}`)
    return name.endsWith('.ts') ? [`${dir}/${name}`] : []
  })
}

/** The product's files: what the layering and the import graph are about. */
export const productFiles = (): string[] => [...tsFiles('src'), ...tsFiles('jobs'), ...tsFiles('config')]

/**
 * Every relative module a file names, as a repository path: static imports (`import type` too),
 * re-exports (`export … from`) and dynamic `import()`. Packages (no leading dot) are left out.
 */
export function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(path.join(ROOT, file), 'utf8'), true, true)
  return importedFiles
    .map((ref) => ref.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => rel(path.resolve(ROOT, path.dirname(file), name)))
}
