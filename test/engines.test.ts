import { readFileSync } from 'node:fs'
import { expect } from 'chai'

const version = (text: string) => text.replace(/^v/, '').split('.').map(Number) as [number, number, number]
const atLeast = (a: number[], b: number[]) => (a[0]! !== b[0]! ? a[0]! > b[0]! : a[1]! !== b[1]! ? a[1]! > b[1]! : a[2]! >= b[2]!)

describe('the Node version platforms read', () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string }; devDependencies: Record<string, string> }

  it('declares engines >=22.18 <23 and pins, in .node-version, a 22.x inside it that the node dev dependency brings', () => {
    expect(pkg.engines.node).to.equal('>=22.18 <23')
    const pinned = version(readFileSync('.node-version', 'utf8').trim())
    expect(pinned[0]).to.equal(22)
    expect(atLeast(pinned, [22, 18, 0])).to.equal(true)
    expect(pkg.devDependencies.node).to.equal(`^${pinned.join('.')}`)
  })

  it('runs these tests on a Node inside the range', () => {
    const running = version(process.version)
    expect(running[0]).to.equal(22)
    expect(atLeast(running, [22, 18, 0])).to.equal(true)
  })
})
