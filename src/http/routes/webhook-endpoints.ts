import type { Router } from 'express'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import {
  createWebhookEndpoint,
  disableWebhookEndpoint,
  listWebhookEndpoints,
  recentWebhookDeliveries,
  redriveWebhookDeliveries,
  rotateWebhookSecret,
  type WebhookEndpointDeps,
} from '../../platform/webhook-endpoints.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import {
  WebhookDeliveryList,
  WebhookDeliveryQuery,
  WebhookEndpointCreated,
  WebhookEndpointList,
  WebhookEndpointPath,
  WebhookEndpointRequest,
  WebhookRedriven,
  WebhookSecretRotated,
} from '../webhook-endpoint-schemas.ts'

const URL_REFUSALS = ['webhook_url_invalid', 'webhook_url_not_https', 'webhook_url_forbidden_address', 'webhook_url_unresolvable'] as const

/** The API document's description of each route below, in the same order. */
export const webhookEndpointApi = apiRegistry(
  'Webhook endpoints',
  'Signed events out (docs/events.md): staff subscribe endpoints, rotate their secrets, see and redrive deliveries',
)
const api = {
  create: webhookEndpointApi.add({
    operationId: 'createWebhookEndpoint',
    method: 'post',
    path: '/platform-admin/webhook-endpoints',
    auth: 'staff-elevated',
    summary: 'Subscribe an endpoint to event types; the signing secret is shown once (audited)',
    description:
      'The URL must be https and its host must not resolve to a loopback, private or link-local address unless WEBHOOK_ALLOWED_HOSTS names it.',
    body: WebhookEndpointRequest,
    success: { status: 201, description: 'Created', body: WebhookEndpointCreated },
    problems: { 422: URL_REFUSALS },
  }),
  list: webhookEndpointApi.add({
    operationId: 'listWebhookEndpoints',
    method: 'get',
    path: '/platform-admin/webhook-endpoints',
    auth: 'staff',
    summary: 'Every endpoint, newest first, with its pending and dead-lettered deliveries (no secrets)',
    success: { status: 200, description: 'The endpoints', body: WebhookEndpointList },
  }),
  disable: webhookEndpointApi.add({
    operationId: 'disableWebhookEndpoint',
    method: 'delete',
    path: '/platform-admin/webhook-endpoints/:id',
    auth: 'staff-elevated',
    summary: 'Disable an endpoint: it hears nothing more and its pending deliveries stop (audited)',
    params: WebhookEndpointPath,
    success: { status: 204, description: 'Disabled' },
    problems: { 404: ['webhook_endpoint_not_found'] },
  }),
  rotate: webhookEndpointApi.add({
    operationId: 'rotateWebhookSecret',
    method: 'post',
    path: '/platform-admin/webhook-endpoints/:id/secret',
    auth: 'staff-elevated',
    summary: 'A new signing secret, shown once; the old one keeps signing beside it for an hour (audited)',
    params: WebhookEndpointPath,
    success: { status: 201, description: 'Rotated', body: WebhookSecretRotated },
    problems: { 404: ['webhook_endpoint_not_found'] },
  }),
  deliveries: webhookEndpointApi.add({
    operationId: 'listWebhookDeliveries',
    method: 'get',
    path: '/platform-admin/webhook-endpoints/:id/deliveries',
    auth: 'staff',
    summary: "The endpoint's recent deliveries, newest first: event type, webhook-id, state, attempts, last status (no payloads)",
    params: WebhookEndpointPath,
    query: WebhookDeliveryQuery,
    success: { status: 200, description: 'The deliveries', body: WebhookDeliveryList },
    problems: { 404: ['webhook_endpoint_not_found'] },
  }),
  redrive: webhookEndpointApi.add({
    operationId: 'redriveWebhookDeliveries',
    method: 'post',
    path: '/platform-admin/webhook-endpoints/:id/redrives',
    auth: 'staff-elevated',
    summary: "Send the endpoint's dead-lettered deliveries again, same webhook-id, attempts from zero (audited)",
    params: WebhookEndpointPath,
    success: { status: 200, description: 'How many went back to pending', body: WebhookRedriven },
    problems: { 404: ['webhook_endpoint_not_found'] },
  }),
}

function endpointId(params: Record<string, unknown>): string {
  const id = typeof params.id === 'string' ? params.id : ''
  if (!z.uuid().safeParse(id).success) throw new NotFoundError('webhook_endpoint_not_found', 'There is no such webhook endpoint.')
  return id
}

/** Staff routes of signed events out (docs/events.md); every write needs a fresh step-up elevation. */
export function webhookEndpointRoutes(deps: WebhookEndpointDeps): Router {
  const router = apiRouter()
  const staff = [requireSession(deps.db, deps.clock), requireStaff(deps.db)]

  route(router, api.create, ...staff, async (req, res) => {
    const body = WebhookEndpointRequest.parse(req.body)
    const created = await createWebhookEndpoint(deps, {
      staff: staffSessionOf(res),
      elevationToken: req.get('x-elevation-token'),
      url: body.url,
      events: body.events,
    })
    res.status(201).json(created)
  })

  route(router, api.list, ...staff, async (_req, res) => {
    res.json(await listWebhookEndpoints(deps, staffSessionOf(res)))
  })

  route(router, api.disable, ...staff, async (req, res) => {
    await disableWebhookEndpoint(deps, {
      staff: staffSessionOf(res),
      elevationToken: req.get('x-elevation-token'),
      id: endpointId(req.params),
    })
    res.status(204).end()
  })

  route(router, api.rotate, ...staff, async (req, res) => {
    const id = endpointId(req.params)
    res.status(201).json(await rotateWebhookSecret(deps, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), id }))
  })

  route(router, api.deliveries, ...staff, async (req, res) => {
    const id = endpointId(req.params)
    const query = WebhookDeliveryQuery.parse(req.query)
    const endpoints = await listWebhookEndpoints(deps, staffSessionOf(res))
    if (!endpoints.items.some((endpoint) => endpoint.id === id))
      throw new NotFoundError('webhook_endpoint_not_found', 'There is no such webhook endpoint.')
    res.json(await recentWebhookDeliveries(deps, { staff: staffSessionOf(res), id, limit: query.limit }))
  })

  route(router, api.redrive, ...staff, async (req, res) => {
    const id = endpointId(req.params)
    res.json(await redriveWebhookDeliveries(deps, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), id }))
  })

  return router
}
