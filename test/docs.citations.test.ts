import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { expect } from 'chai'

// The design notes the code once cited (DESIGN.md's sections, a use-case catalog's ids, another
// design's "hops") are not in the repository: code cites docs/architecture.md, the README or a page of docs/ instead.
// Spelled in pieces so that this file does not match itself.
const OLD_LABEL = new RegExp(['DESIGN ?§', 'OX-[SWO][0-9]', '\\bOB[0-9]+\\b', '\\bseed [0-9]', '\\bhop [0-9]'].join('|'))
const CODE = ['src', 'jobs', 'test', 'bench', 'config', 'client', 'knexfile.ts']

function filesUnder(entry: string): string[] {
  if (statSync(entry).isFile()) return /\.(ts|js|cjs)$/.test(entry) ? [entry] : []
  return readdirSync(entry).flatMap((name) => filesUnder(path.join(entry, name)))
}

const architecture = readFileSync('docs/architecture.md', 'utf8')
const headings = (markdown: string) => [...markdown.matchAll(/^#+ (.+)$/gm)].map((match) => match[1]!.trim())
// `README "Section"`, `docs/delivery.md "Channels"`, `bench/README.md "Capacity"`: the quote may follow on the comment's next line.
const SECTION_CITATION = /\b(README|docs\/[a-z-]+\.md|bench\/(?:README|HISTORY)\.md)(?:\s*\n\s*\*)?\s+"([^"]+)"/g

describe('citations of the design in code', () => {
  it('no file outside migrations/ cites a design note that is not in the repository', () => {
    const hits = CODE.flatMap(filesUnder).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((line, index) => (OLD_LABEL.test(line) ? [`${file}:${index + 1}: ${line.trim()}`] : [])),
    )
    expect(hits, 'cite docs/architecture.md §N or a section of the README or a docs/ page, or say the reason inline').to.deep.equal([])
  })

  it('every label left in a frozen migration is explained in docs/architecture.md "Labels in frozen migrations"', () => {
    const start = architecture.indexOf('## Labels in frozen migrations')
    expect(start).to.be.greaterThan(-1)
    const table = architecture.slice(start)
    const labels = new Set(
      filesUnder('migrations').flatMap((file) => {
        const text = readFileSync(file, 'utf8')
        const sections = [...text.matchAll(/DESIGN ?((?:§[0-9]+(?:, ?)?)+)/g)].flatMap((match) =>
          match[1]!
            .split(/, ?/)
            .filter(Boolean)
            .map((section) => `DESIGN ${section}`),
        )
        const ids = [...text.matchAll(/OX-[SWO][0-9]+|\bOB[0-9]+\b|\bseed [0-9]+(?:, hop [0-9]+)?/g)].map((match) => match[0])
        return [...sections, ...ids]
      }),
    )
    expect(labels.size).to.be.greaterThan(0)
    expect([...labels].filter((label) => !table.includes(label))).to.deep.equal([])
  })

  it('every docs/architecture.md §N and every "section" of the README, a docs/ page or a bench/ page that the code cites exists', () => {
    const sections = new Set(headings(architecture).flatMap((heading) => /^([0-9]+)\./.exec(heading)?.[1] ?? []))
    const headingsOf = (page: string) => new Set(headings(readFileSync(page === 'README' ? 'README.md' : page, 'utf8')))
    const citing = CODE.flatMap(filesUnder).filter((file) => file !== path.join('test', 'docs.citations.test.ts'))
    const missing = citing.flatMap((file) => {
      const text = readFileSync(file, 'utf8')
      const cited = [...text.matchAll(/docs\/architecture\.md §([0-9]+)/g)].filter((match) => !sections.has(match[1]!))
      const sectionCited = [...text.matchAll(SECTION_CITATION)].filter((match) => !headingsOf(match[1]!).has(match[2]!))
      return [...cited, ...sectionCited].map((match) => `${file}: ${match[0]}`)
    })
    expect(missing).to.deep.equal([])
  })
})
