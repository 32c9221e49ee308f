import { Router, type Express, type RequestHandler } from 'express'
import type { z } from 'zod'

/** Which credentials an operation needs; each maps to security schemes in the document. */
export type Auth = 'none' | 'bearer' | 'staff' | 'elevated' | 'staff-elevated' | 'metrics' | 'api-key'

/** Problem `code` values an operation may answer, per HTTP status (besides the ones every route can give). */
export type Problems = Partial<Record<number, readonly string[]>>

/**
 * One route as the API document describes it, written next to its handler. `path` uses Express
 * syntax (`/organizations/:id`); the document turns it into `{id}`. Adding a route:
 *
 *   const api = { lift: suppressionApi.add({ operationId: 'liftSuppression', method: 'delete',
 *     path: '/platform-admin/suppressions/:id', auth: 'staff-elevated', summary: '…',
 *     params: z.object({ id: z.string() }), success: { status: 204, description: 'Lifted' },
 *     problems: { 404: ['suppression_not_found'] } }) }
 *   route(router, api.lift, ...staff, handler)
 *
 * and, for a new route module, its registry in API_REGISTRIES (src/http/openapi.ts). Credentials
 * imply their problems and headers (`elevated` adds X-Elevation-Token and 403 elevation_required),
 * and so does `idempotent`; list only the route's own `problems`. Then `npm run client:generate`.
 */
export type ApiOperation = {
  operationId: string
  method: 'get' | 'post' | 'delete'
  path: string
  summary: string
  description?: string
  auth: Auth
  /** Path parameters, named as in `path`. */
  params?: z.ZodObject
  query?: z.ZodObject
  /** Request headers other than Authorization and X-Elevation-Token (which `auth` implies). */
  headers?: z.ZodObject
  body?: z.ZodType
  /** The body's media type when it is not `application/json` (SNS posts JSON as `text/plain`). */
  bodyContentType?: string
  /** A body is optional (POST /step-ups takes none or `{}`). */
  bodyOptional?: true
  success: { status: number; description: string; body?: z.ZodType; contentType?: string; headers?: z.ZodObject }
  problems?: Problems
  /** Public routes that count against the per-client limit (429 too_many_requests). */
  clientLimited?: true
  /**
   * Takes an Idempotency-Key (src/http/idempotency-key.ts, src/platform/idempotency.ts): implies the
   * request header, `Idempotent-Replayed` on the success and IDEMPOTENCY_PROBLEMS.
   */
  idempotent?: true
}

/** The operations of one route module under one tag; the document is built from every registry. */
export type ApiRegistry = { tag: string; description: string; operations: ApiOperation[]; add: (operation: ApiOperation) => ApiOperation }

export function apiRegistry(tag: string, description: string): ApiRegistry {
  const operations: ApiOperation[] = []
  return {
    tag,
    description,
    operations,
    add(operation) {
      if (operations.some((o) => o.operationId === operation.operationId || (o.method === operation.method && o.path === operation.path))) {
        throw new Error(`operation ${operation.operationId} (${operation.method} ${operation.path}) is described twice`)
      }
      operations.push(operation)
      return operation
    },
  }
}

/**
 * A router that matches paths exactly as the document writes them: `/HEALTHZ` and `/healthz/` are
 * not `/healthz` (Express matches both by default, aliases nobody documented or tests).
 */
export function apiRouter(): Router {
  return Router({ caseSensitive: true, strict: true })
}

/** Mounts a handler at exactly the method and path its description names, so the two cannot disagree. */
export function route(router: Router | Express, operation: ApiOperation, ...handlers: RequestHandler[]): void {
  // An Express app routes like a Router; one signature keeps the overloads out of the way.
  ;(router as Router)[operation.method](operation.path, ...handlers)
}

/** `/a/:id/b` → `/a/{id}/b` */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}
