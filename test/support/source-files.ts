import { readdir } from 'node:fs/promises'
import { join } from 'node:path'

/** The TypeScript files below a directory of the repository, as sorted forward-slash paths. */
export async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name).replaceAll('\\', '/'))
    .sort()
}
