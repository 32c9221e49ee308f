import type { Request, Router } from 'express'
import { z } from 'zod'
import { isLocale } from '../../delivery/locales.ts'
import { NotFoundError, UnprocessableError } from '../../identity/errors.ts'
import { checkOrganizationName } from '../../organization/organization-name.ts'
import { acceptCourierMessage, courierMessage, type CourierDeps } from '../../platform/courier.ts'
import { courierCallerOf, requireApiKey } from '../api-key-auth.ts'
import { CourierAccepted, CourierMessage, CourierMessageBody, CourierMessagePath } from '../courier-schemas.ts'
import { localeOf } from '../locale.ts'
import { idempotencyKeyOf, replayedHeaders } from '../idempotency-key.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { problemOfDomain } from '../problem.ts'

/** The API document's description of each route below, in the same order. */
export const courierApi = apiRegistry(
  'Courier',
  'Messages from other identity systems, authenticated with an API key (docs/courier.md): the same outbox and guarantees as our own flows',
)
const api = {
  send: courierApi.add({
    operationId: 'sendCourierMessage',
    method: 'post',
    path: '/v1/messages',
    auth: 'api-key',
    summary: 'Deliver a one-time code or sign-in link (sealed on arrival, idempotent)',
    description:
      'Needs an Idempotency-Key: a repeat with the same body answers the first `messageId` with `Idempotent-Replayed: true` and sends nothing more; the same key with another body is 422 `idempotency_key_reused` (docs/api.md "Idempotency-Key"). Keys are remembered for 24 hours. 202 means accepted for delivery, never delivered: follow it with GET /v1/messages/{messageId}.',
    idempotent: true,
    body: CourierMessageBody,
    success: {
      status: 202,
      description: 'Accepted (or the replay of an earlier request with this key)',
      body: CourierAccepted,
    },
    problems: {
      403: ['api_key_scope'],
      422: [
        'invalid_destination',
        'unsupported_phone_number',
        'invalid_secret',
        'invalid_link',
        'link_origin_not_allowed',
        'invalid_expiry',
        'invalid_data',
        'channel_unavailable',
      ],
      429: ['rate_limited', 'destination_budget_exhausted', 'api_key_budget_exhausted', 'too_many_requests'],
      // A purpose an older live worker cannot render yet (docs/upgrading.md "Format negotiation").
      503: ['upgrade_in_progress'],
    },
  }),
  get: courierApi.add({
    operationId: 'getCourierMessage',
    method: 'get',
    path: '/v1/messages/:messageId',
    auth: 'api-key',
    summary: "A message's state and attempts (destination masked), to the key that sent it",
    params: CourierMessagePath,
    success: { status: 200, description: 'The message', body: CourierMessage },
    problems: { 404: ['message_not_found'], 429: ['too_many_requests'] },
  }),
}

/**
 * `POST /v1/messages` and `GET /v1/messages/{id}` over the courier core (src/platform/courier.ts).
 * `failedAuthentication`: counts a refused key against the client's per-client limit.
 */
export function courierRoutes(deps: CourierDeps & { failedAuthentication?: (req: Request) => Promise<unknown> }): Router {
  const router = apiRouter()
  const caller = requireApiKey(deps.db, deps.clock, deps.failedAuthentication)

  route(router, api.send, caller, async (req, res) => {
    const idempotencyKey = idempotencyKeyOf(req)
    const body = CourierMessageBody.parse(req.body)
    // The organization-name rule, in its one home: a display name carries no link, address or line break.
    const appName = body.data?.appName === undefined ? undefined : checkOrganizationName(body.data.appName)
    if (appName && !appName.ok)
      throw new UnprocessableError('invalid_data', 'data.appName may not carry a link, an address or a line break.')
    const outcome = await acceptCourierMessage(deps, courierCallerOf(res), {
      purpose: body.purpose,
      channel: body.channel,
      destination: body.destination,
      secret: body.secret,
      expiresAt: new Date(body.expiresAt),
      locale: body.locale && isLocale(body.locale) ? body.locale : localeOf(res),
      ...(appName?.ok ? { appName: appName.name } : {}),
      idempotencyKey,
    })
    if ('refused' in outcome) throw problemOfDomain(outcome.refused)
    res.status(202).set(replayedHeaders(outcome.replayed)).json({ messageId: outcome.messageId })
  })

  route(router, api.get, caller, async (req, res) => {
    const messageId = String(req.params.messageId ?? '')
    const message = z.uuid().safeParse(messageId).success ? await courierMessage(deps.db, courierCallerOf(res), messageId) : undefined
    if (!message) throw new NotFoundError('message_not_found', 'There is no such message.')
    res.json(message)
  })

  return router
}
