import { expect } from 'chai'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import ts from 'typescript'

/**
 * docs/architecture.md "Where the SQL lives": every statement on the outbox's tables and functions
 * (schema `outbox`) and on `pgboss.job` is written in a `src/outbox/*-sql.ts` module, and
 * `pgboss.job` in one of them only. Only string and template literals are read (what reaches the
 * database), so a comment naming a table is no finding.
 */
const OUTBOX_SQL_MODULE = /^src\/outbox\/[a-z-]+-sql\.ts$/
const PGBOSS_JOB_HOME = 'src/outbox/pgboss-jobs-sql.ts'
const OUTBOX_NAME = /(?<![\w.])outbox\.[a-z_]+/g
const PGBOSS_JOB = /(?<![\w.])pgboss\.job\b/g

/**
 * The release step grants on and sets row policies for `pgboss.job`, and checks a privilege on an
 * outbox table: privileges on the schema, re-applied on every release, not statements on its rows.
 * Their home is the release step itself (moving them into src/outbox would point src/db upwards).
 */
const RELEASE_STEP = 'src/db/release.ts'

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name).replaceAll('\\', '/'))
    .sort()
}

/** The text of every string and template literal in a file (the parts a statement can be built from). */
function literals(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node)) found.push(node.text)
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

async function namesByFile(pattern: RegExp): Promise<Map<string, string[]>> {
  const files = [...(await sourceFiles('src')), ...(await sourceFiles('jobs'))]
  const result = new Map<string, string[]>()
  for (const path of files) {
    const names = literals(path, await readFile(path, 'utf8')).flatMap((literal) => [...literal.matchAll(pattern)].map((match) => match[0]))
    if (names.length > 0) result.set(path, [...new Set(names)].sort())
  }
  return result
}

describe('where the outbox SQL lives', () => {
  it('names outbox tables and functions only in src/outbox/*-sql.ts', async () => {
    const outside = [...(await namesByFile(OUTBOX_NAME))].filter(([path]) => !OUTBOX_SQL_MODULE.test(path) && path !== RELEASE_STEP)
    expect(Object.fromEntries(outside)).to.deep.equal({})
  })

  it(`reads pgboss.job only in ${PGBOSS_JOB_HOME}`, async () => {
    const outside = [...(await namesByFile(PGBOSS_JOB))].filter(([path]) => path !== PGBOSS_JOB_HOME && path !== RELEASE_STEP)
    expect(Object.fromEntries(outside)).to.deep.equal({})
  })

  it('finds a table named in a knex builder and in a template literal (the guard itself works)', () => {
    const names = literals('x.ts', "db('outbox.security_outbox_attempts'); sql`SELECT 1 FROM pgboss.job j JOIN ${t}` // outbox.comment")
      .join('\n')
      .match(new RegExp(`${OUTBOX_NAME.source}|${PGBOSS_JOB.source}`, 'g'))
    expect(names).to.deep.equal(['outbox.security_outbox_attempts', 'pgboss.job'])
  })
})
