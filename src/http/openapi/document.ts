import { z } from 'zod'
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponsesObject } from 'zod-openapi'
import {
  EVERY_ROUTE_PROBLEMS,
  ElevationTokenHeader,
  IDEMPOTENCY_PROBLEMS,
  IdempotencyKeyHeader,
  IdempotentReplayedHeader,
  RETRY_AFTER_STATUSES,
  RetryAfterHeader,
  problemSchema,
} from './common.ts'
import { openApiPath, type ApiOperation, type ApiRegistry, type Problems } from './registry.ts'

const SECURITY: Record<ApiOperation['auth'], Record<string, string[]>[]> = {
  none: [],
  bearer: [{ bearer: [] }],
  staff: [{ bearer: [] }],
  elevated: [{ bearer: [], elevation: [] }],
  'staff-elevated': [{ bearer: [], elevation: [] }],
  metrics: [{ metricsToken: [] }],
  'api-key': [{ apiKey: [] }],
}

const AUTH_PROBLEMS: Record<ApiOperation['auth'], Problems> = {
  none: {},
  bearer: { 401: ['unauthenticated'] },
  staff: { 401: ['unauthenticated'], 403: ['not_staff'] },
  elevated: { 401: ['unauthenticated'], 403: ['elevation_required'] },
  'staff-elevated': { 401: ['unauthenticated'], 403: ['not_staff', 'elevation_required'] },
  // 401 with METRICS_TOKEN set and none or another sent; 404 in production without one (not served).
  metrics: { 401: ['unauthenticated'], 404: ['not_found'] },
  // One 401 for a malformed, unknown or revoked key.
  'api-key': { 401: ['unauthenticated'] },
}

function mergeProblems(...sets: Problems[]): Map<number, string[]> {
  const merged = new Map<number, string[]>()
  for (const set of sets) {
    for (const [status, codes] of Object.entries(set)) {
      const list = merged.get(Number(status)) ?? []
      for (const code of codes ?? []) if (!list.includes(code)) list.push(code)
      merged.set(Number(status), list)
    }
  }
  return new Map([...merged].sort(([a], [b]) => a - b))
}

/** Every problem an operation can answer: its own, its credentials', and what any route may answer. */
export function problemsOf(operation: ApiOperation): Map<number, string[]> {
  return mergeProblems(
    EVERY_ROUTE_PROBLEMS,
    AUTH_PROBLEMS[operation.auth],
    operation.body || operation.query ? { 422: ['invalid_request'] } : {},
    operation.clientLimited ? { 429: ['too_many_requests'] } : {},
    operation.idempotent ? IDEMPOTENCY_PROBLEMS : {},
    operation.problems ?? {},
  )
}

function responsesOf(operation: ApiOperation): ZodOpenApiResponsesObject {
  const { success } = operation
  const successHeaders = {
    ...(success.headers?.shape ?? {}),
    ...(operation.idempotent ? { 'Idempotent-Replayed': IdempotentReplayedHeader.optional() } : {}),
  }
  const responses: ZodOpenApiResponsesObject = {
    [success.status]: {
      description: success.description,
      ...(Object.keys(successHeaders).length > 0 ? { headers: z.object(successHeaders) } : {}),
      ...(success.body ? { content: { [success.contentType ?? 'application/json']: { schema: success.body } } } : {}),
    },
  }
  for (const [status, codes] of problemsOf(operation)) {
    const headers: Record<string, z.ZodType> = {}
    if (RETRY_AFTER_STATUSES.has(status)) headers['Retry-After'] = RetryAfterHeader
    if (status === 401 && codes.includes('unauthenticated'))
      headers['WWW-Authenticate'] = z.literal('Bearer').meta({ description: 'The bearer scheme is expected' })
    responses[String(status) as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: `Refused: ${codes.map((code) => `\`${code}\``).join(', ')}`,
      ...(Object.keys(headers).length > 0 ? { headers: z.object(headers) } : {}),
      content: { 'application/problem+json': { schema: problemSchema(status, codes) } },
    }
  }
  return responses
}

function operationObject(operation: ApiOperation, tag: string): ZodOpenApiOperationObject {
  const elevated = operation.auth === 'elevated' || operation.auth === 'staff-elevated'
  const headerShape = {
    ...(operation.headers?.shape ?? {}),
    ...(elevated ? { 'X-Elevation-Token': ElevationTokenHeader } : {}),
    ...(operation.idempotent ? { 'Idempotency-Key': IdempotencyKeyHeader } : {}),
  }
  const requestParams = {
    ...(operation.params ? { path: operation.params } : {}),
    ...(operation.query ? { query: operation.query } : {}),
    ...(Object.keys(headerShape).length > 0 ? { header: z.object(headerShape) } : {}),
  }
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    ...(operation.description ? { description: operation.description } : {}),
    tags: [tag],
    security: SECURITY[operation.auth],
    ...(Object.keys(requestParams).length > 0 ? { requestParams } : {}),
    ...(operation.body
      ? {
          requestBody: {
            required: !operation.bodyOptional,
            content: { [operation.bodyContentType ?? 'application/json']: { schema: operation.body } },
          },
        }
      : {}),
    responses: responsesOf(operation),
  }
}

/** The OpenAPI 3.1 document, generated from the operations the route modules describe next to their handlers. */
export function buildDocument(registries: readonly ApiRegistry[]): Record<string, unknown> {
  const paths: ZodOpenApiPathsObject = {}
  for (const registry of registries) {
    for (const operation of registry.operations) {
      const path = (paths[openApiPath(operation.path)] ??= {})
      if (path[operation.method]) throw new Error(`${operation.method} ${operation.path} is described twice`)
      path[operation.method] = operationObject(operation, registry.tag)
    }
  }
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Sealpost',
      version: '0.3.0',
      description:
        'Transactional outbox for security messages: sign-up, sign-in methods, password recovery, step-up, organizations and invitations, and the staff views of the outbox. Errors are RFC 9457 problems with a stable `code`.',
      license: { name: 'UNLICENSED', identifier: 'LicenseRef-UNLICENSED' },
    },
    servers: [{ url: '/', description: 'This server' }],
    tags: registries.map((registry) => ({ name: registry.tag, description: registry.description })),
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A session token from POST /sessions or POST /sign-ups/confirmation.' },
        elevation: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Elevation-Token',
          description: 'An elevation token from POST /step-ups/confirmation, sent with the session it belongs to.',
        },
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'A courier API key (`sp_live_…`) from POST /platform-admin/api-keys, shown once when created.',
        },
        metricsToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'The `METRICS_TOKEN` of the deployment (open in development when unset).',
        },
      },
    },
    paths,
  }) as unknown as Record<string, unknown>
}
