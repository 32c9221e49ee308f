import { Router } from 'express'
import type { Knex } from 'knex'
import { HttpProblem, sendProblem } from '../problem.ts'

/** Liveness never touches the database; readiness answers 503 when it is unreachable. */
export function healthRoutes(db: Knex): Router {
  const router = Router()
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' })
  })
  router.get('/readyz', async (_req, res) => {
    try {
      await db.raw('SELECT 1')
      res.json({ status: 'ready' })
    } catch {
      sendProblem(res, new HttpProblem(503, 'database_unavailable', 'The database is unreachable.', { headers: { 'Retry-After': '5' } }))
    }
  })
  return router
}
