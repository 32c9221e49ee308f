import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import ts from 'typescript'
import { sourceFiles } from './support/source-files.ts'

/**
 * docs/architecture.md "Where the SQL lives": the domain directories build no SQL outside their
 * named SQL modules (`*-sql.ts`), and every statement on the outbox's tables and functions
 * (schema `outbox`) and on `pgboss.job` is written in a `src/outbox/*-sql.ts` module, and
 * `pgboss.job` in one of them only. Only string and template literals are read (what reaches the
 * database), so a comment naming a table is no finding.
 */
const DOMAIN_DIRECTORIES = ['src/identity', 'src/organization', 'src/platform', 'src/outbox']
const SQL_MODULE = /-sql\.ts$/
const OUTBOX_SQL_MODULE = /^src\/outbox\/[a-z-]+-sql\.ts$/
/** A relation of the application's schemas, named in a string (a knex table or a statement). */
const SCHEMA_NAME = /(?<![\w.])(?:identity|organization|platform|outbox|pgboss)\.[a-z_]+/g
/**
 * Methods only a knex builder has (or that hand SQL to one); `transaction` is not among them: a use
 * case opens its transaction and passes it to the SQL modules.
 */
const BUILDER_METHODS = new Set([
  'raw',
  'whereRaw',
  'where',
  'andWhere',
  'orWhere',
  'whereIn',
  'whereNotIn',
  'whereNull',
  'whereNotNull',
  'whereExists',
  'forUpdate',
  'forShare',
  'skipLocked',
  'noWait',
  'onConflict',
  'returning',
  'first',
  'join',
  'leftJoin',
  'orderBy',
  'groupBy',
  'increment',
  'decrement',
  'del',
  'ref',
  'select',
  'insert',
])
const PGBOSS_JOB_HOME = 'src/outbox/pgboss-jobs-sql.ts'
const OUTBOX_NAME = /(?<![\w.])outbox\.[a-z_]+/g
const PGBOSS_JOB = /(?<![\w.])pgboss\.job\b/g

/**
 * The release step grants on and sets row policies for `pgboss.job`, and checks a privilege on an
 * outbox table: privileges on the schema, re-applied on every release, not statements on its rows.
 * Their home is the release step itself (moving them into src/outbox would point src/db upwards).
 */
const RELEASE_STEP = new Set(['src/db/release.ts', 'src/db/delivery-job-functions.ts'])

/**
 * Audit actions and event types spelled like a relation of the schema they concern: values written
 * into `platform.audit_records.action` and `platform.events.type`, not SQL. A literal that is
 * exactly one of them is no finding.
 */
const AUDIT_ACTIONS = new Set(['identity.exported', 'identity.erased', 'identity.created'])

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

/** What a file builds SQL with: the builder methods it calls and the schema names its strings hold. */
function sqlBuilding(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS)
  const found = new Set<string>()
  const visit = (node: ts.Node): void => {
    // An array's `.join(',')` takes one argument at most; knex's join takes a table and its condition.
    const arrayJoin = (call: ts.CallExpression, name: string) => name === 'join' && call.arguments.length <= 1
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      BUILDER_METHODS.has(node.expression.name.text) &&
      !arrayJoin(node, node.expression.name.text)
    )
      found.add(`.${node.expression.name.text}()`)
    if ((ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node)) && !AUDIT_ACTIONS.has(node.text))
      for (const [name] of node.text.matchAll(SCHEMA_NAME)) found.add(name)
    ts.forEachChild(node, visit)
  }
  visit(file)
  return [...found].sort()
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

describe('where the SQL lives', () => {
  it(`builds SQL in the domain directories (${DOMAIN_DIRECTORIES.join(', ')}) only in their *-sql.ts modules`, async () => {
    const outside: Record<string, string[]> = {}
    for (const dir of DOMAIN_DIRECTORIES) {
      for (const path of await sourceFiles(dir)) {
        if (SQL_MODULE.test(path)) continue
        const found = sqlBuilding(path, await readFile(path, 'utf8'))
        if (found.length > 0) outside[path] = found
      }
    }
    expect(outside).to.deep.equal({})
  })

  it('finds a knex builder, raw SQL and a table name in a constant (the domain guard itself works)', () => {
    const found = sqlBuilding(
      'x.ts',
      "const T = 'organization.invitations'; await trx(T).where({ id }).forUpdate(); await trx.raw('SELECT 1') // platform.comment",
    )
    expect(found).to.deep.equal(['.forUpdate()', '.raw()', '.where()', 'organization.invitations'])
  })

  it('names outbox tables and functions only in src/outbox/*-sql.ts', async () => {
    const outside = [...(await namesByFile(OUTBOX_NAME))].filter(([path]) => !OUTBOX_SQL_MODULE.test(path) && !RELEASE_STEP.has(path))
    expect(Object.fromEntries(outside)).to.deep.equal({})
  })

  it(`reads pgboss.job only in ${PGBOSS_JOB_HOME}`, async () => {
    const outside = [...(await namesByFile(PGBOSS_JOB))].filter(([path]) => path !== PGBOSS_JOB_HOME && !RELEASE_STEP.has(path))
    expect(Object.fromEntries(outside)).to.deep.equal({})
  })

  it('finds a table named in a knex builder and in a template literal (the guard itself works)', () => {
    const names = literals('x.ts', "db('outbox.security_outbox_attempts'); sql`SELECT 1 FROM pgboss.job j JOIN ${t}` // outbox.comment")
      .join('\n')
      .match(new RegExp(`${OUTBOX_NAME.source}|${PGBOSS_JOB.source}`, 'g'))
    expect(names).to.deep.equal(['outbox.security_outbox_attempts', 'pgboss.job'])
  })
})
