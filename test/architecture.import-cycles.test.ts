import { expect } from 'chai'
import { importsOf, productFiles } from './support/import-graph.ts'

/**
 * docs/architecture.md §2 "No circles": no module of src/, jobs/ or config/ reaches itself through
 * its imports. An edge is every way a file names another: static imports, re-exports, dynamic
 * `import()` and `import type` too. A type-only import changes nothing at run time, but it is
 * still a dependency a reader has to follow, and two modules that each need the other's types are
 * one module cut in two; a split made to fit the size rule usually closes its circle with exactly
 * such an import (the two circles issue 42 names are each closed by an `import type`).
 */

type Graph = ReadonlyMap<string, readonly string[]>

/** The strongly connected components of more than one file (or a file importing itself): each a circle, named by its sorted files. */
function circlesOf(graph: Graph): string[] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const circles: string[] = []
  const visit = (file: string): void => {
    index.set(file, index.size)
    low.set(file, index.get(file)!)
    stack.push(file)
    onStack.add(file)
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(file, Math.min(low.get(file)!, low.get(next)!))
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!))
    }
    if (low.get(file) !== index.get(file)) return
    const component: string[] = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(component.sort().join(' ↔ '))
  }
  for (const file of graph.keys()) if (!index.has(file)) visit(file)
  return circles.sort()
}

function productGraph(): Graph {
  const files = productFiles()
  const product = new Set(files)
  return new Map(files.map((file) => [file, importsOf(file).filter((target) => product.has(target))]))
}

describe('the import graph (docs/architecture.md §2 "No circles")', () => {
  const graph = productGraph()

  it('finds a circle of any length, and none in a graph without one', () => {
    const graphOf = (edges: Record<string, string[]>): Graph => new Map(Object.entries(edges))
    expect(circlesOf(graphOf({ a: ['b'], b: ['c'], c: ['a'], d: ['a'] }))).to.deep.equal(['a ↔ b ↔ c'])
    expect(circlesOf(graphOf({ a: ['a'], b: [] }))).to.deep.equal(['a'])
    expect(circlesOf(graphOf({ a: ['b', 'c'], b: ['c'], c: [] }))).to.deep.equal([])
    const edges = [...graph.values()].reduce((sum, targets) => sum + targets.length, 0)
    expect(edges, 'the imports of the product are read at all').to.be.above(500)
  })

  it("has no circle among the imports of src/, jobs/ and config/ (the delivery path's two went with its rewrite)", () => {
    expect(circlesOf(graph)).to.deep.equal([])
  })
})
