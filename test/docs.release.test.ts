import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { openApiDocument } from '../src/http/openapi.ts'
import { PREVIOUS_RELEASE } from './support/previous-release.ts'

/**
 * A release is package.json's version, the CHANGELOG's newest release section and the previous
 * release the upgrade test starts from (docs/upgrading.md "Releases and tags"); they move together.
 * Lines under "## Unreleased" are the next release's and are not checked here.
 */

const RELEASE_HEADING = /^## (\d+\.\d+\.\d+) — (.+) \((\d{4}-\d{2}-\d{2})\)$/

type Release = { version: string; title: string; date: string; body: string }

/** The CHANGELOG's second-level sections, in order: their heading and the text up to the next one. */
function changelogSections(text: string): { heading: string; body: string }[] {
  const parts = text.split(/^(?=## )/m).filter((part) => part.startsWith('## '))
  return parts.map((part) => {
    const newline = part.indexOf('\n')
    return { heading: part.slice(0, newline === -1 ? undefined : newline).trim(), body: newline === -1 ? '' : part.slice(newline + 1) }
  })
}

/** The newest release section: the first one that is not "Unreleased"; it must carry a version and a date. */
function newestRelease(text: string): Release {
  const section = changelogSections(text).find(({ heading }) => heading !== '## Unreleased')
  if (!section) throw new Error('the CHANGELOG has no release section')
  const match = RELEASE_HEADING.exec(section.heading)
  if (!match) throw new Error(`the newest release heading "${section.heading}" is not "## <version> — <title> (<YYYY-MM-DD>)"`)
  return { version: match[1]!, title: match[2]!, date: match[3]!, body: section.body }
}

/** The version and commit of the "Minimum previous version" line in a release's section. */
function minimumPreviousVersion(body: string): { version: string; commit: string } | undefined {
  const match = /^\**Minimum previous version: (\d+\.\d+\.\d+) \(commit ([0-9a-f]{7,40})\)/m.exec(body)
  return match ? { version: match[1]!, commit: match[2]! } : undefined
}

describe('the release is honest', () => {
  const changelog = readFileSync('CHANGELOG.md', 'utf8')
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }
  const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { version: string; packages: Record<string, { version?: string }> }

  it("package.json's version is the CHANGELOG's newest release, and so are package-lock.json's and the API document's", () => {
    const release = newestRelease(changelog)
    expect(pkg.version, 'package.json').to.equal(release.version)
    expect(lock.version, 'package-lock.json').to.equal(release.version)
    expect(lock.packages['']?.version, "package-lock.json's root package").to.equal(release.version)
    expect((openApiDocument().info as { version: string }).version, 'the OpenAPI document').to.equal(release.version)
  })

  it('the newest release carries a real date and a "Minimum previous version" line naming the release the upgrade test starts from', () => {
    const release = newestRelease(changelog)
    expect(new Date(`${release.date}T00:00:00Z`).toISOString().slice(0, 10), 'its date').to.equal(release.date)
    const minimum = minimumPreviousVersion(release.body)
    expect(minimum, `a "Minimum previous version: <version> (commit <id>)" line under ${release.version}`).to.not.equal(undefined)
    expect(minimum!.version, 'the minimum previous version').to.equal(PREVIOUS_RELEASE.version)
    expect(minimum!.commit, "the minimum previous version's commit").to.equal(PREVIOUS_RELEASE.commit)
    expect(minimum!.version, 'a release cannot start from itself').to.not.equal(release.version)
  })

  it('has one "## Unreleased" section, above every release, and each release version once, newest first', () => {
    const headings = changelogSections(changelog).map(({ heading }) => heading)
    expect(
      headings.filter((heading) => heading === '## Unreleased'),
      'Unreleased sections',
    ).to.have.length(1)
    expect(headings[0]).to.equal('## Unreleased')
    const versions = headings.slice(1).map((heading) => /^## (\d+)\.(\d+)\.(\d+) /.exec(heading)?.slice(1).map(Number))
    expect(
      versions.every((version) => version !== undefined),
      `release headings: ${headings.join(' | ')}`,
    ).to.equal(true)
    for (let i = 1; i < versions.length; i += 1) {
      const [a, b] = [versions[i - 1]!, versions[i]!]
      const newer = a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]!
      expect(newer, `${headings[i]} is newer than ${headings[i + 1]}`).to.be.greaterThan(0)
    }
  })

  it('reads a CHANGELOG as the checks above do: lines under Unreleased are allowed, a release without a date or minimum is not', () => {
    const released = '## 9.1.0 — a title (2026-01-31)\n\nMinimum previous version: 9.0.0 (commit abcdef1)\n'
    expect(newestRelease(`# Changelog\n\n## Unreleased\n\n- a line another branch added\n\n${released}`)).to.include({
      version: '9.1.0',
      date: '2026-01-31',
    })
    expect(minimumPreviousVersion(newestRelease(released).body)).to.deep.equal({ version: '9.0.0', commit: 'abcdef1' })
    expect(() => newestRelease('## Unreleased\n\n## 9.1.0 — a title\n')).to.throw('is not')
    expect(minimumPreviousVersion('Minimum previous version for a rolling upgrade: 9.0.0')).to.equal(undefined)
  })
})
