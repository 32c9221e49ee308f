import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { productFiles, ROOT } from './support/import-graph.ts'

/**
 * docs/architecture.md §2 "Short functions": no function of src/, jobs/ or config/ is longer than
 * this. A longer one tells several steps; it is split into named steps, as
 * `startDeliveryPipeline` (src/runtime/delivery-pipeline.ts) is.
 */
const MAX_LINES = 80

type Span = { name: string; lines: number }

/** The name a function is known by: its own, its variable's or property's; an anonymous one counts as part of the named one around it. */
function nameOf(node: ts.SignatureDeclaration, enclosing: string, file: ts.SourceFile): string {
  if (node.name && (ts.isIdentifier(node.name) || ts.isPrivateIdentifier(node.name) || ts.isStringLiteral(node.name))) return node.name.text
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  const parent = node.parent
  if (
    (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) &&
    ts.isIdentifier(parent.name)
  )
    return parent.name.text
  return enclosing || `(module level of ${file.fileName})`
}

/** Every function with a body (declarations, methods, accessors, constructors, arrows, function expressions) and its length in lines. */
function functionSpans(fileName: string, text: string): Span[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const spans: Span[] = []
  const lineOf = (position: number) => file.getLineAndCharacterOfPosition(position).line
  const visit = (node: ts.Node, enclosing: string): void => {
    let inside = enclosing
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      inside = nameOf(node, enclosing, file)
      spans.push({ name: inside, lines: lineOf(node.getEnd()) - lineOf(node.getStart(file)) + 1 })
    }
    ts.forEachChild(node, (child) => visit(child, inside))
  }
  visit(file, '')
  return spans
}

/** `file name` → the longest function of that name in that file, for every one over MAX_LINES. */
function longFunctions(): Map<string, number> {
  const long = new Map<string, number>()
  for (const file of productFiles())
    for (const { name, lines } of functionSpans(file, readFileSync(path.join(ROOT, file), 'utf8'))) {
      const key = `${file} ${name}`
      if (lines > MAX_LINES) long.set(key, Math.max(long.get(key) ?? 0, lines))
    }
  return long
}

describe(`function length (docs/architecture.md §2 "Short functions": at most ${MAX_LINES} lines)`, () => {
  const long = longFunctions()

  it('measures every kind of function, from its first line to its last, an anonymous one under the name around it', () => {
    const text = [
      'function declared() {', // 1
      '  return [1].map((n) => {', // 2: anonymous, counted as `declared`
      '    return n', // 3
      '  })', // 4
      '}', // 5
      'const arrow = async () => 1', // 6
      'class Box { constructor() {}', // 7
      '  get size() { return 1 }', // 8
      '  method() {', // 9
      '    return function () {}', // 10
      '  } }', // 11
      'const object = { property: function () {} }', // 12
    ].join('\n')
    expect(functionSpans('example.ts', text)).to.deep.equal([
      { name: 'declared', lines: 5 },
      { name: 'declared', lines: 3 },
      { name: 'arrow', lines: 1 },
      { name: 'constructor', lines: 1 },
      { name: 'size', lines: 1 },
      { name: 'method', lines: 3 },
      { name: 'method', lines: 1 },
      { name: 'property', lines: 1 },
    ])
  })

  it(`keeps every function of src/, jobs/ and config/ within ${MAX_LINES} lines (the delivery path's recordBatch, deliveryStep and claimBatch were the last)`, () => {
    expect([...long].map(([key, lines]) => `${key} (${lines} lines)`)).to.deep.equal([])
  })
})
