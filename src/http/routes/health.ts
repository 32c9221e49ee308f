import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError, sendProblem } from '../problem.ts'

/** The API document's description of each route below. */
export const healthApi = apiRegistry('Health', 'Liveness and readiness for the platform router')
const api = {
  liveness: healthApi.add({
    operationId: 'liveness',
    method: 'get',
    path: '/healthz',
    auth: 'none',
    summary: 'Liveness: the process runs (never touches the database)',
    success: { status: 200, description: 'Alive', body: z.object({ status: z.literal('ok') }) },
  }),
  readiness: healthApi.add({
    operationId: 'readiness',
    method: 'get',
    path: '/readyz',
    auth: 'none',
    summary: 'Readiness: the database answers',
    success: { status: 200, description: 'Ready', body: z.object({ status: z.literal('ready') }) },
    problems: { 503: ['database_unavailable'] },
  }),
}

/** Liveness never touches the database; readiness answers 503 when it is unreachable. */
export function healthRoutes(db: Knex): Router {
  const router = apiRouter()
  route(router, api.liveness, (_req, res) => {
    res.json({ status: 'ok' })
  })
  route(router, api.readiness, async (_req, res) => {
    try {
      await db.raw('SELECT 1')
      res.json({ status: 'ready' })
    } catch {
      sendProblem(
        res,
        new HttpProblemError(503, 'database_unavailable', 'The database is unreachable.', { headers: { 'Retry-After': '5' } }),
      )
    }
  })
  return router
}
