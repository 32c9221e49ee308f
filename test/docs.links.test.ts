import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { expect } from 'chai'

const PAGES = [
  'README.md',
  'CHANGELOG.md',
  ...['docs', 'bench'].flatMap((dir) =>
    readdirSync(dir)
      .filter((name) => name.endsWith('.md'))
      .map((name) => path.join(dir, name)),
  ),
]

/** The page without its fenced code blocks, where a `[x](y)` is code, not a link. */
const prose = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '')

/** GitHub's anchor for a heading: lower-case, punctuation dropped, each space a '-', repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const result = new Set<string>()
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    result.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return result
}

describe('links between the README and the guide', () => {
  it('every relative link in README.md, CHANGELOG.md, docs/ and bench/ names a file that exists, and a heading of it when it has an anchor', () => {
    const broken = PAGES.flatMap((page) =>
      [...prose(readFileSync(page, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)].flatMap(([, target]) => {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) return []
        const [file, anchor] = target!.split('#') as [string, string | undefined]
        const resolved = file === '' ? page : path.join(path.dirname(page), file)
        if (!existsSync(resolved)) return [`${page}: ${target} (no such file)`]
        if (anchor === undefined || !resolved.endsWith('.md')) return []
        return anchors(readFileSync(resolved, 'utf8')).has(anchor) ? [] : [`${page}: ${target} (no such heading)`]
      }),
    )
    expect(broken).to.deep.equal([])
  })

  it('README.md stays a front page: at most 250 lines, and it links every page of docs/', () => {
    const readme = readFileSync('README.md', 'utf8')
    expect(readme.split('\n').length).to.be.at.most(250)
    const unlinked = readdirSync('docs')
      .filter((name) => name.endsWith('.md'))
      .filter((name) => !readme.includes(`](docs/${name})`))
    expect(unlinked).to.deep.equal([])
  })
})
