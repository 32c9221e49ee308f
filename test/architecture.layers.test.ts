import { expect } from 'chai'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { importsOf, productFiles, ROOT, tsFiles } from './support/import-graph.ts'

/**
 * The layering of docs/architecture.md §2, top to bottom. A file may import from its own
 * directory and from any lower layer; directories that share a layer must not know each other.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['src/bin'],
  ['src/runtime'],
  ['jobs', 'src/http'],
  ['src/hooks'],
  ['src/metrics', 'src/delivery', 'src/providers'],
  ['src/organization', 'src/platform'],
  ['src/identity'],
  ['src/outbox'],
  ['src/db'],
  ['config'],
  ['src/crypto', 'src/logging'],
  ['src/errors'],
]
/** Migrations are history: only the migration runner's registry reads them. */
const MIGRATION_READERS = new Set(['src/db/migrations.ts'])

/** The layer directory a file belongs to (the deepest match), or undefined. */
function homeOf(file: string): string | undefined {
  return LAYERS.flat()
    .filter((dir) => file.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)[0]
}
const rankOf = (dir: string) => LAYERS.findIndex((layer) => layer.includes(dir))

/** Why `from` must not import `to`, or null when the arrow points the right way. */
function wrongArrow(from: string, to: string): string | null {
  if (to.startsWith('migrations/')) return MIGRATION_READERS.has(from) ? null : 'reads a migration (history)'
  if (to.startsWith('test/') || to.startsWith('bench/')) return 'imports test or bench code'
  const source = homeOf(from)
  const target = homeOf(to)
  if (!source) return 'has no layer'
  if (!target) return `imports ${to}, which has no layer`
  if (source === target) return null
  const [a, b] = [rankOf(source), rankOf(target)]
  if (a === b) return `imports its sibling layer ${target}`
  return a > b ? `imports the higher layer ${target}` : null
}

const PRODUCT_FILES = productFiles()

describe('the import layering (docs/architecture.md §2)', () => {
  it('gives every directory of src/ a layer', () => {
    const dirs = readdirSync(path.join(ROOT, 'src')).map((name) => `src/${name}`)
    expect(dirs.filter((dir) => !LAYERS.flat().includes(dir))).to.deep.equal([])
  })

  it('names every layer directory in the document', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8')
    const section = doc.slice(doc.indexOf('## 2. Layers'), doc.indexOf('## 3.'))
    expect(LAYERS.flat().filter((dir) => !section.includes(`${dir}/`))).to.deep.equal([])
  })

  it('has src/, jobs/ and config/ import only downward, never a sibling, a migration or a test', () => {
    const wrong = PRODUCT_FILES.flatMap((file) =>
      importsOf(file).flatMap((target) => {
        const why = wrongArrow(file, target)
        return why ? [`${file} → ${target}: ${why}`] : []
      }),
    )
    expect(wrong).to.deep.equal([])
  })

  it('keeps migrations free of product code: they import only other migrations', () => {
    const wrong = tsFiles('migrations').flatMap((file) =>
      importsOf(file)
        .filter((target) => !target.startsWith('migrations/'))
        .map((target) => `${file} → ${target}`),
    )
    expect(wrong).to.deep.equal([])
  })

  it('reads the imports of bench/, which may import any layer (and no product file imports it)', () => {
    // The check above refuses product → bench; this proves the parser sees imports at all.
    expect(
      tsFiles('bench')
        .flatMap(importsOf)
        .some((target) => target.startsWith('src/')),
    ).to.equal(true)
  })
})
