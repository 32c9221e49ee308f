import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { productFiles, ROOT } from './support/import-graph.ts'

/**
 * docs/architecture.md §2 "One home per rule": the rules that had several copies have one helper
 * each, and this test finds a second copy by what it must call. Behaviour that differed between
 * the copies is tested where it lives (the hooks' reading of numbers, the send caps' calling codes,
 * the tiered budgets).
 */
const HOMES = {
  /** Secrets compared in constant time: `sameSecret`. */
  timingSafeEqual: ['src/crypto/constant-time.ts'],
  /** Numbers read with libphonenumber (`readPhoneNumber`); the calling codes a cap may name, from its table. */
  libphonenumber: ['config/send-caps.ts', 'src/outbox/phone-numbers.ts'],
  /** A refused webhook or hook counted and logged: `countRefusal`. */
  refusalCount: ['src/providers/webhooks.ts'],
  /** A budget spent or checked (one window, or several tiers by the one rule in SQL): `src/identity/rate-limits.ts`. */
  budgetSql: ['src/identity/rate-limits.ts'],
}

/** The budget statements of `src/identity/rate-limits-sql.ts`: whoever calls them spends a budget by a rule of its own. */
const BUDGET_SQL = ['rateLimitWindow', 'insertRateLimitHitTx', 'deleteRateLimitHitsTx', 'budgetTiersWait', 'spendBudgetTiersTx']

const parse = (file: string) =>
  ts.createSourceFile(file, readFileSync(path.join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)

/** The files whose syntax holds a node `found` accepts. */
function filesWith(found: (node: ts.Node) => boolean, files = productFiles()): string[] {
  return files.filter((file) => {
    let hit = false
    const visit = (node: ts.Node): void => {
      if (found(node)) hit = true
      else if (!hit) ts.forEachChild(node, visit)
    }
    visit(parse(file))
    return hit
  })
}

const callsNamed = (name: string) => (node: ts.Node) =>
  ts.isCallExpression(node) &&
  ((ts.isIdentifier(node.expression) && node.expression.text === name) ||
    (ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === name))
const importsPackage = (prefix: string) => (node: ts.Node) =>
  ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier) && node.moduleSpecifier.text.startsWith(prefix)
/** A call `….count(source, 'refused', …)`: a refusal told by hand. */
const countsRefusal = (node: ts.Node) =>
  callsNamed('count')(node) && (node as ts.CallExpression).arguments.some((arg) => ts.isStringLiteral(arg) && arg.text === 'refused')

const callsBudgetSql = (node: ts.Node) => BUDGET_SQL.some((name) => callsNamed(name)(node))

describe('one home per rule (docs/architecture.md §2 "One home per rule")', () => {
  it('finds each kind of copy it looks for (the finders work)', () => {
    expect(filesWith(callsNamed('timingSafeEqual'))).to.include('src/crypto/constant-time.ts')
    expect(filesWith(importsPackage('libphonenumber-js'))).to.include('src/outbox/phone-numbers.ts')
    expect(filesWith(countsRefusal)).to.include('src/providers/webhooks.ts')
    expect(filesWith(callsBudgetSql)).to.include('src/identity/rate-limits.ts')
  })

  it('compares secrets in constant time in one helper, sameSecret (src/crypto/constant-time.ts)', () => {
    expect(filesWith(callsNamed('timingSafeEqual'))).to.deep.equal(HOMES.timingSafeEqual)
  })

  it('reads phone numbers through libphonenumber in one module, and takes calling codes from its table', () => {
    expect(filesWith(importsPackage('libphonenumber-js')).sort()).to.deep.equal(HOMES.libphonenumber)
  })

  it('counts and logs a refused webhook or hook in one helper, countRefusal', () => {
    expect(filesWith(countsRefusal)).to.deep.equal(HOMES.refusalCount)
  })

  it('spends and checks budgets in one module, src/identity/rate-limits.ts (tiers by the one SQL rule)', () => {
    expect(filesWith(callsBudgetSql)).to.deep.equal(HOMES.budgetSql)
  })
})
