import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import { parseLinkOrigin } from '../../../config/link-origins.ts'
import { changeApiKey, createApiKey, listApiKeys, revokeApiKey, rotateApiKey } from '../../platform/api-keys.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import { ApiKeyChangeBody, ApiKeyList, ApiKeyPath, CreatedApiKey, NewApiKeyBody } from '../courier-schemas.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'

/** The API document's description of each route below, in the same order. */
export const apiKeyApi = apiRegistry('API keys', 'The courier API keys staff issue: scoped, rate-limited, stored as hashes, audited')
const api = {
  list: apiKeyApi.add({
    operationId: 'listApiKeys',
    method: 'get',
    path: '/platform-admin/api-keys',
    auth: 'staff',
    summary: 'Every API key, newest first, without key material',
    success: { status: 200, description: 'The keys', body: ApiKeyList },
  }),
  create: apiKeyApi.add({
    operationId: 'createApiKey',
    method: 'post',
    path: '/platform-admin/api-keys',
    auth: 'staff-elevated',
    summary: 'Issue an API key (audited): the key is in this answer only',
    description:
      'A key scoped to `magic_link` needs `linkOrigins`. `sendsPerHour` and `destinationsPerHour` bound what a leaked key can do (docs/courier.md "Keys").',
    body: NewApiKeyBody,
    success: { status: 201, description: 'Created', body: CreatedApiKey },
    problems: { 422: ['link_origins_required'] },
  }),
  change: apiKeyApi.add({
    operationId: 'changeApiKey',
    method: 'post',
    path: '/platform-admin/api-keys/:id/changes',
    auth: 'staff-elevated',
    summary: "Change a live key's hourly volume, new addresses an hour or link origins (audited): the key itself stays",
    params: ApiKeyPath,
    body: ApiKeyChangeBody,
    success: { status: 204, description: 'Changed' },
    problems: { 404: ['api_key_not_found'], 422: ['link_origins_required'] },
  }),
  rotate: apiKeyApi.add({
    operationId: 'rotateApiKey',
    method: 'post',
    path: '/platform-admin/api-keys/:id/rotation',
    auth: 'staff-elevated',
    summary: 'Replace a key (audited): a new key with the same scopes and limits, the old one revoked at once',
    params: ApiKeyPath,
    success: { status: 201, description: 'The new key', body: CreatedApiKey },
    problems: { 404: ['api_key_not_found'] },
  }),
  revoke: apiKeyApi.add({
    operationId: 'revokeApiKey',
    method: 'delete',
    path: '/platform-admin/api-keys/:id',
    auth: 'staff-elevated',
    summary: 'Revoke a key (audited): it stops working at once',
    params: ApiKeyPath,
    success: { status: 204, description: 'Revoked' },
    problems: { 404: ['api_key_not_found'] },
  }),
}

const notFound = () => new NotFoundError('api_key_not_found', 'There is no such live API key.')
// Each as a browser compares it (punycode host, no default port), each once.
const originsOf = (written: readonly string[]) => [...new Set(written.map((origin) => parseLinkOrigin(origin)!))]

/** Staff management of courier API keys (docs/courier.md); every change needs a fresh step-up. */
export function apiKeyRoutes({ db, clock }: { db: Knex; clock: () => Date }): Router {
  const router = apiRouter()
  const staff = [requireSession(db, clock), requireStaff(db)]

  route(router, api.list, ...staff, async (_req, res) => {
    res.json(await listApiKeys(db, { staff: staffSessionOf(res), now: clock() }))
  })

  route(router, api.create, ...staff, async (req, res) => {
    const body = NewApiKeyBody.parse(req.body)
    const created = await createApiKey(db, {
      staff: staffSessionOf(res),
      elevationToken: req.get('x-elevation-token'),
      now: clock(),
      ...body,
      purposes: [...new Set(body.purposes)],
      channels: [...new Set(body.channels)],
      linkOrigins: originsOf(body.linkOrigins),
    })
    res.status(201).json(created)
  })

  route(router, api.change, ...staff, async (req, res) => {
    const id = String(req.params.id ?? '')
    if (!z.uuid().safeParse(id).success) throw notFound()
    const body = ApiKeyChangeBody.parse(req.body)
    const change = { ...body, ...(body.linkOrigins ? { linkOrigins: originsOf(body.linkOrigins) } : {}) }
    await changeApiKey(db, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), now: clock(), id, change })
    res.status(204).end()
  })

  route(router, api.rotate, ...staff, async (req, res) => {
    const id = String(req.params.id ?? '')
    if (!z.uuid().safeParse(id).success) throw notFound()
    res
      .status(201)
      .json(await rotateApiKey(db, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), now: clock(), id }))
  })

  route(router, api.revoke, ...staff, async (req, res) => {
    const id = String(req.params.id ?? '')
    if (!z.uuid().safeParse(id).success) throw notFound()
    await revokeApiKey(db, { staff: staffSessionOf(res), elevationToken: req.get('x-elevation-token'), now: clock(), id })
    res.status(204).end()
  })

  return router
}
