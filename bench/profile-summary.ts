/* eslint-disable no-console -- prints a report for a person */
import { readFile } from 'node:fs/promises'

/**
 * `node bench/profile-summary.ts <file.cpuprofile>`: where a process spent its CPU, by package
 * (or our own file) and by function, self time only, idle excluded.
 */
type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }
const file = process.argv[2]
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile>')
const profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] } = JSON.parse(await readFile(file, 'utf8'))
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const selfUs = new Map<number, number>()
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))

const owner = (url: string) => {
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (dependency) return dependency[1]!
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0]
  const own = /\/(src|jobs|config|migrations)\/(.+)$/.exec(url)
  return own ? `${own[1]}/${own[2]}` : url || '(native)'
}
const byOwner = new Map<string, number>()
const byFunction = new Map<string, number>()
let busy = 0
for (const [id, us] of selfUs) {
  const node = byId.get(id)!
  const name = node.callFrame.functionName
  if (name === '(idle)' || name === '(program)') continue
  busy += us
  const where = owner(node.callFrame.url)
  byOwner.set(where, (byOwner.get(where) ?? 0) + us)
  const key = `${name || '(anonymous)'} ${where}${node.callFrame.url ? ':' + (node.callFrame.lineNumber + 1) : ''}`
  byFunction.set(key, (byFunction.get(key) ?? 0) + us)
}
const total = profile.timeDeltas.reduce((sum, delta) => sum + delta, 0)
console.log(`busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s profiled`)
const top = (map: Map<string, number>, n: number) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([key, us]) => `  ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${key}`)
    .join('\n')
console.log(`by package or file (self time):\n${top(byOwner, 15)}`)
console.log(`by function (self time):\n${top(byFunction, 25)}`)
