import { expect } from 'chai'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'

/** The house style: a source file holds one concern, and stays under this many lines. */
const MAX_LINES = 300

const ROOT = path.resolve(import.meta.dirname, '..')

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const name = `${dir}/${entry.name}`
    if (entry.isDirectory()) return tsFiles(name)
    return entry.name.endsWith('.ts') ? [name] : []
  })
}

describe('source file size', () => {
  it(`keeps every file under src/ and jobs/ within ${MAX_LINES} lines: a longer one is split along its seams`, () => {
    const files = [...tsFiles('src'), ...tsFiles('jobs')]
    expect(files.length, 'files found').to.be.above(50)
    const long = files
      .map((file) => ({ file, lines: readFileSync(path.join(ROOT, file), 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ file, lines }) => `${file} (${lines} lines)`)
    expect(long, 'files over the limit').to.deep.equal([])
  })
})
