import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import ts from 'typescript'
import { sourceFiles } from './support/source-files.ts'

/**
 * CONVENTIONS §3 and §6, as names: a function ends in `Tx` exactly when its first parameter is the
 * caller's transaction (`Knex.Transaction`; one that also runs on the pool takes `Knex` and has no
 * suffix), and every error class extends the one root `SealpostError` and ends in `Error`.
 */
const PRODUCT_DIRECTORIES = ['src', 'jobs', 'config']
const ROOT_ERROR = 'SealpostError'
const BUILT_IN_ERRORS = new Set(['Error', 'TypeError', 'RangeError', 'AggregateError'])

const parse = (path: string, text: string) => ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)

/** Every named function, arrow function or method whose `Tx` suffix and first parameter disagree. */
function txMismatches(path: string, text: string): string[] {
  const file = parse(path, text)
  const found: string[] = []
  const check = (name: string, parameters: ts.NodeArray<ts.ParameterDeclaration>) => {
    const takesTransaction = parameters[0]?.type?.getText(file) === 'Knex.Transaction'
    if (takesTransaction !== name.endsWith('Tx')) found.push(name)
  }
  const visit = (node: ts.Node): void => {
    if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name && ts.isIdentifier(node.name))
      check(node.name.text, node.parameters)
    if (
      (ts.isVariableDeclaration(node) || ts.isPropertyAssignment(node)) &&
      ts.isIdentifier(node.name) &&
      node.initializer &&
      (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer))
    )
      check(node.name.text, node.initializer.parameters)
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

/** Each class of a file with the class it extends, if any. */
function classes(path: string, text: string): { name: string; base: string | undefined }[] {
  const found: { name: string; base: string | undefined }[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isClassDeclaration(node) && node.name) {
      const base = node.heritageClauses?.find((clause) => clause.token === ts.SyntaxKind.ExtendsKeyword)?.types[0]?.expression
      found.push({ name: node.name.text, base: base && ts.isIdentifier(base) ? base.text : base?.getText() })
    }
    ts.forEachChild(node, visit)
  }
  visit(parse(path, text))
  return found
}

/** Error classes that do not descend from the root, and descendants of the root not named `…Error`. */
function errorFindings(files: Map<string, string>): string[] {
  const all = [...files].flatMap(([path, text]) => classes(path, text).map((entry) => ({ ...entry, path })))
  const byName = new Map(all.map((entry) => [entry.name, entry]))
  const chain = (name: string): string[] => {
    const seen: string[] = []
    for (let current = byName.get(name)?.base; current !== undefined && !seen.includes(current); current = byName.get(current)?.base)
      seen.push(current)
    return seen
  }
  const findings: string[] = []
  for (const { name, path } of all) {
    const ancestors = chain(name)
    const isError = ancestors.some((ancestor) => BUILT_IN_ERRORS.has(ancestor))
    if (!isError) continue
    if (name !== ROOT_ERROR && !ancestors.includes(ROOT_ERROR)) findings.push(`${path} ${name} does not extend ${ROOT_ERROR}`)
    if (!name.endsWith('Error')) findings.push(`${path} ${name} is not named …Error`)
  }
  return findings
}

async function productFiles(): Promise<Map<string, string>> {
  const paths = (await Promise.all(PRODUCT_DIRECTORIES.map(sourceFiles))).flat()
  return new Map(await Promise.all(paths.map(async (path) => [path, await readFile(path, 'utf8')] as const)))
}

describe('names that carry a rule', () => {
  it('ends a function in Tx exactly when its first parameter is the caller’s Knex.Transaction', async () => {
    const findings = [...(await productFiles())].flatMap(([path, text]) => txMismatches(path, text).map((name) => `${path} ${name}`))
    expect(findings).to.deep.equal([])
  })

  it(`makes every error class extend ${ROOT_ERROR} and end in Error`, async () => {
    expect(errorFindings(await productFiles())).to.deep.equal([])
  })

  it('finds a Tx without a transaction, a transaction without Tx, and a stray or misnamed error (the guards themselves work)', () => {
    const text = `
      export async function findTx(db: Knex, id: string) {}
      const lockRow = async (trx: Knex.Transaction) => {}
      export function insertRowTx(trx: Knex.Transaction) {}
      export function read(db: Knex | Knex.Transaction) {}
      class Stray extends Error {}
      class Refused extends ${ROOT_ERROR} {}
      class FineError extends Refused {}`
    expect(txMismatches('x.ts', text)).to.deep.equal(['findTx', 'lockRow'])
    const root = `export class ${ROOT_ERROR} extends Error {}`
    expect(
      errorFindings(
        new Map([
          ['x.ts', text],
          ['root.ts', root],
        ]),
      ),
    ).to.deep.equal(['x.ts Stray does not extend SealpostError', 'x.ts Stray is not named …Error', 'x.ts Refused is not named …Error'])
  })
})
