import type { RequestHandler } from 'express'
import type { ApiRegistry } from './openapi/registry.ts'
import { HttpProblemError, sendProblem } from './problem.ts'

/**
 * Answers 405 with `Allow` for a documented path asked with a method the document does not list
 * for it — OPTIONS (no CORS is served), HEAD, PUT… — where Express would answer OPTIONS and HEAD
 * itself with a 200 nobody described. Paths the document does not name fall through to 404, and so
 * do the `unmounted` ones (a hook that is not configured answers every method as an unknown path).
 */
export function documentedMethodsOnly(registries: readonly ApiRegistry[], unmounted: ReadonlySet<string> = new Set()): RequestHandler {
  const paths = new Map<string, { pattern: RegExp; methods: string[] }>()
  for (const operation of registries.flatMap((registry) => registry.operations)) {
    if (unmounted.has(operation.path)) continue
    const entry = paths.get(operation.path) ?? {
      pattern: new RegExp(`^${operation.path.replace(/[.]/g, '\\.').replace(/:[A-Za-z0-9_]+/g, '[^/]+')}$`),
      methods: [],
    }
    entry.methods.push(operation.method.toUpperCase())
    paths.set(operation.path, entry)
  }
  const order = ['GET', 'POST', 'DELETE']
  return (req, res, next) => {
    const matching = [...paths.values()].filter(({ pattern }) => pattern.test(req.path))
    if (matching.length === 0) return next()
    const allowed = [...new Set(matching.flatMap(({ methods }) => methods))].sort((a, b) => order.indexOf(a) - order.indexOf(b))
    if (allowed.includes(req.method)) return next()
    const problem = new HttpProblemError(405, 'method_not_allowed', `${req.method} is not an operation of this path.`, {
      headers: { Allow: allowed.join(', ') },
    })
    if (req.method === 'HEAD') {
      res.status(405).set(problem.headers).end()
      return
    }
    sendProblem(res, problem)
  }
}
