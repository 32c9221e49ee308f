import express, { type Request, type RequestHandler, type Router } from 'express'
import { WEBHOOK_ROUTES } from '../../providers/wiring.ts'
import {
  WebhookRefusedError,
  type BoundWebhook,
  type FormDelivery,
  type InboundRequest,
  type JsonDelivery,
  type WebhookDeps,
  type WebhookRoute,
} from '../../providers/webhooks.ts'
import { apiRegistry, apiRouter, route, type ApiOperation, type Problems } from '../openapi/registry.ts'
import { HttpProblemError } from '../problem.ts'

/** The status of each refusal a provider's webhook may answer; any other is 403 (not signed by the provider). */
const REFUSAL_STATUS: Record<string, number> = { malformed: 400, unsupported_media_type: 415, certificate_unavailable: 503 }
const statusOf = (reason: string) => REFUSAL_STATUS[reason] ?? 403

/** The problems of a route, grouped by status, from its provider's refusals. */
function problemsOf(refusals: readonly string[]): Problems {
  const problems: Record<number, string[]> = {}
  for (const reason of refusals) (problems[statusOf(reason)] ??= []).push(reason)
  return problems
}

/** The API document's description of every provider's webhook routes (src/providers/registry.ts), in registry order. */
export const webhookApi = apiRegistry(
  'Webhooks',
  'Provider delivery events: each provider’s event deliveries and status callbacks, as its folder declares them (src/providers/registry.ts)',
)
const operations = new Map<string, ApiOperation>(
  WEBHOOK_ROUTES.map((hook) => [
    hook.operationId,
    webhookApi.add({
      operationId: hook.operationId,
      method: hook.method,
      path: hook.path,
      auth: 'none',
      summary: hook.summary,
      ...(hook.description ? { description: hook.description } : {}),
      ...(hook.query ? { query: hook.query } : {}),
      ...(hook.body ? { body: hook.body } : {}),
      ...(hook.bodyContentType ? { bodyContentType: hook.bodyContentType } : {}),
      success: {
        status: 200,
        description: hook.answer.description,
        body: hook.answer.body,
        ...(hook.answer.contentType ? { contentType: hook.answer.contentType } : {}),
      },
      problems: problemsOf(hook.refusals),
    }),
  ]),
)

/** The request as a provider's webhook reads it: its headers and query, and the body as read (below). */
function inbound<B>(req: Request, body: B): InboundRequest<B> {
  const query = req.query as Record<string, unknown>
  return { body, header: (name) => req.get(name), query: (name) => (typeof query[name] === 'string' ? query[name] : undefined) }
}

/**
 * The body parser and handler of one route, per how its provider reads bodies: `text` and `raw` of
 * any media type, `json` and `form` only as their own (anything else reaches the provider as
 * unreadable, refused once its signature check has run), `none` for a GET.
 */
function handlerOf(hook: WebhookRoute<unknown>, deps: WebhookDeps, settings: unknown): RequestHandler[] {
  const limit = hook.limit ?? '16kb'
  const answer = (run: () => Promise<unknown>): Promise<unknown> =>
    run().catch((error: unknown) => {
      if (!(error instanceof WebhookRefusedError)) throw error
      throw new HttpProblemError(
        statusOf(error.reason),
        error.reason,
        'The webhook delivery was refused.',
        error.reason === 'certificate_unavailable' ? { headers: { 'Retry-After': '30' } } : {},
      )
    })
  const respond = (run: (req: Request) => Promise<unknown>): RequestHandler => {
    return async (req, res) => {
      const result = await answer(() => run(req))
      if (hook.answer.contentType === 'text/plain') res.status(200).type('text/plain').send(result)
      else res.status(200).json(result)
    }
  }
  switch (hook.read) {
    case 'text':
      return [
        express.text({ type: () => true, limit }),
        respond((req) => hook.handle(deps, settings, inbound(req, typeof req.body === 'string' ? req.body : ''))),
      ]
    case 'raw':
      return [
        express.raw({ type: () => true, limit }),
        respond((req) => hook.handle(deps, settings, inbound(req, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)))),
      ]
    case 'json':
      return [
        express.json({ type: 'application/json', limit }),
        respond((req) => {
          const parsed = hook.body?.safeParse(req.body) ?? { success: true, data: req.body as unknown }
          const delivery: JsonDelivery = !req.is('application/json')
            ? { unreadable: 'unsupported_media_type' }
            : parsed.success
              ? { body: parsed.data }
              : { unreadable: 'malformed' }
          return hook.handle(deps, settings, inbound(req, delivery))
        }),
      ]
    case 'form':
      return [
        express.text({ type: 'application/x-www-form-urlencoded', limit }),
        respond((req) => {
          const delivery: FormDelivery =
            req.is('application/x-www-form-urlencoded') && typeof req.body === 'string'
              ? { params: [...new URLSearchParams(req.body)] }
              : { unreadable: 'unsupported_media_type' }
          return hook.handle(deps, settings, inbound(req, delivery))
        }),
      ]
    case 'none':
      return [respond((req) => hook.handle(deps, settings, inbound(req, undefined)))]
  }
}

/**
 * Provider delivery events (docs/delivery.md "Delivery feedback"): every registered provider's
 * webhook routes, each with its settings. Mounted before the app's JSON parser: SNS posts its JSON
 * as `text/plain`, and its notifications (SES bounces carry the original headers) exceed 16 KiB.
 * Refusals are 4xx, which SNS does not retry; an authentic event for a message we do not know is
 * 200, because retrying it can never help (docs/operations.md).
 */
export function webhookRoutes(deps: WebhookDeps, webhooks: readonly BoundWebhook[]): Router {
  const router = apiRouter()
  for (const { route: hook, settings } of webhooks) {
    const operation = operations.get(hook.operationId)
    if (!operation) throw new Error(`webhook ${hook.operationId} is not in the registry`)
    route(router, operation, ...handlerOf(hook, deps, settings))
  }
  return router
}
