import { z } from 'zod'
import { apiRegistry } from '../openapi/registry.ts'

/** The API's own description and the metrics, both mounted in app.ts. */
export const serviceApi = apiRegistry('Service', 'This document and the Prometheus metrics')
export const serviceOperations = {
  openapi: serviceApi.add({
    operationId: 'getOpenApiDocument',
    method: 'get',
    path: '/openapi.json',
    auth: 'none',
    summary: 'This OpenAPI 3.1 document (rendered at /docs where enabled)',
    success: { status: 200, description: 'The document', body: z.looseObject({ openapi: z.string() }) },
  }),
  metrics: serviceApi.add({
    operationId: 'getMetrics',
    method: 'get',
    path: '/metrics',
    auth: 'metrics',
    summary: 'Prometheus metrics of the web process, with the database-derived outbox gauges',
    success: { status: 200, description: 'Prometheus text exposition format', body: z.string(), contentType: 'text/plain' },
  }),
}
