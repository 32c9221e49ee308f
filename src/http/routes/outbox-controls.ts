import type { Router } from 'express'
import type { Knex } from 'knex'
import { z } from 'zod'
import { NotFoundError } from '../../identity/errors.ts'
import { CHANNELS, PROVIDER_IDS } from '../../outbox/constants.ts'
import { messagesToDestination } from '../../platform/message-search.ts'
import type { ReissueDeps } from '../../platform/outbox-admin.ts'
import { channelPauses, deliveryEventCounts, liftHold, liftPause } from '../../platform/provider-controls.ts'
import { redriveDeadLetters } from '../../platform/redrive.ts'
import { requireSession, requireStaff, staffSessionOf } from '../auth.ts'
import {
  ChannelPauses,
  DeliveryCountQuery,
  DeliveryCounts,
  MessageSearch,
  MessageSearchPage,
  Redrive,
  Redriven,
  Released,
} from '../console-schemas.ts'
import { idempotencyKeyOf, replayedHeaders } from '../idempotency-key.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'

const BASE = '/platform-admin/security-outbox'

/** The API document's description of each route below, in the same order. */
export const outboxControlsApi = apiRegistry(
  'Delivery controls',
  'Staff: find the messages sent to a destination, count provider events, redrive dead letters, see and lift pauses and outage holds',
)
const api = {
  search: outboxControlsApi.add({
    operationId: 'searchMessagesByDestination',
    method: 'post',
    path: `${BASE}/message-searches`,
    auth: 'staff',
    summary: 'The messages sent to one exact destination, newest first, destinations masked',
    description:
      'The destination travels in the body (never a URL, so no access log holds it); the server looks messages up by the keyed hash the suppression list uses, never by reading destinations. Messages enqueued before that hash existed are not found.',
    body: MessageSearch,
    success: { status: 200, description: 'One page', body: MessageSearchPage },
    problems: { 400: ['invalid_destination'] },
  }),
  deliveryCounts: outboxControlsApi.add({
    operationId: 'countDeliveryEvents',
    method: 'get',
    path: `${BASE}/delivery-events`,
    auth: 'staff',
    summary: 'Provider events (delivered, bounced, complained…) received over a window, per provider, channel and event',
    query: DeliveryCountQuery,
    success: { status: 200, description: 'The counts', body: DeliveryCounts },
  }),
  redrive: outboxControlsApi.add({
    operationId: 'redriveDeadLetters',
    method: 'post',
    path: `${BASE}/dead-letters/redrives`,
    auth: 'staff-elevated',
    summary: 'Reissue up to 50 dead letters of one reason at once (audited, idempotent); those that cannot be reissued are counted',
    description:
      'Each dead letter goes through the single reissue (same checks, same audit record); one that it would refuse is skipped and counted by that refusal code. Go on with `after` = the answer’s `endCursor` while `hasMore`. The Idempotency-Key remembers the answer; a repeat answers it again with `Idempotent-Replayed: true` and does nothing.',
    idempotent: true,
    body: Redrive,
    success: {
      status: 200,
      description: 'What the redrive did (or the replay of an earlier one with this key)',
      body: Redriven,
    },
  }),
  pauses: outboxControlsApi.add({
    operationId: 'listChannelPauses',
    method: 'get',
    path: `${BASE}/pauses`,
    auth: 'staff',
    summary: 'Each channel paused by a provider’s throttling, and until when',
    success: { status: 200, description: 'The running pauses', body: ChannelPauses },
  }),
  liftPause: outboxControlsApi.add({
    operationId: 'liftChannelPause',
    method: 'delete',
    path: `${BASE}/channels/:channel/pause`,
    auth: 'staff-elevated',
    summary: "End a channel's throttle pause now (audited); its held messages go out at once",
    params: z.object({ channel: z.enum(CHANNELS) }),
    success: { status: 200, description: 'Lifted', body: Released },
    problems: { 404: ['pause_not_found'] },
  }),
  liftHold: outboxControlsApi.add({
    operationId: 'liftProviderHold',
    method: 'delete',
    path: `${BASE}/providers/:provider/hold`,
    auth: 'staff-elevated',
    summary: "Mark a provider held down as up (audited); its channel's held messages go out at once",
    params: z.object({ provider: z.enum(PROVIDER_IDS) }),
    success: { status: 200, description: 'Lifted', body: Released },
    problems: { 404: ['hold_not_found'] },
  }),
}

/** Staff delivery controls for the console (docs/operations.md "Runbook: the console's delivery controls"): all behind the one staff check. */
export function outboxControlRoutes({
  db,
  reissue: deps,
  codeHashKeys,
}: {
  db: Knex
  reissue: ReissueDeps
  codeHashKeys?: readonly Buffer[]
}): Router {
  const router = apiRouter()
  const staff = [requireSession(db, deps.clock), requireStaff(db)]

  route(router, api.search, ...staff, async (req, res) => {
    const query = MessageSearch.parse(req.body)
    res.json(
      await messagesToDestination(
        db,
        { codeHashKey: deps.codeHashKey, ...(codeHashKeys ? { codeHashKeys } : {}) },
        {
          staff: staffSessionOf(res),
          now: deps.clock(),
          destination: query.destination,
          limit: query.limit,
          ...(query.before ? { before: query.before } : {}),
        },
      ),
    )
  })

  route(router, api.deliveryCounts, ...staff, async (req, res) => {
    const query = DeliveryCountQuery.parse(req.query)
    res.json(await deliveryEventCounts(db, { staff: staffSessionOf(res), now: deps.clock(), hours: query.hours }))
  })

  route(router, api.redrive, ...staff, async (req, res) => {
    const idempotencyKey = idempotencyKeyOf(req)
    const body = Redrive.parse(req.body ?? {})
    const result = await redriveDeadLetters(db, deps, {
      staff: staffSessionOf(res),
      elevationToken: req.get('x-elevation-token'),
      idempotencyKey,
      reason: body.reason,
      limit: body.limit,
      ...(body.after ? { after: body.after } : {}),
    })
    res.set(replayedHeaders(result.replayed)).json(result.redriven)
  })

  route(router, api.pauses, ...staff, async (_req, res) => {
    res.json(await channelPauses(db, { staff: staffSessionOf(res), now: deps.clock() }))
  })

  route(router, api.liftPause, ...staff, async (req, res) => {
    const channel = z.enum(CHANNELS).safeParse(req.params.channel)
    if (!channel.success) throw new NotFoundError('pause_not_found', 'That channel is not paused.')
    res.json(
      await liftPause(db, {
        staff: staffSessionOf(res),
        elevationToken: req.get('x-elevation-token'),
        channel: channel.data,
        now: deps.clock(),
      }),
    )
  })

  route(router, api.liftHold, ...staff, async (req, res) => {
    const provider = z.enum(PROVIDER_IDS).safeParse(req.params.provider)
    if (!provider.success) throw new NotFoundError('hold_not_found', 'That provider is not held down.')
    res.json(
      await liftHold(db, {
        staff: staffSessionOf(res),
        elevationToken: req.get('x-elevation-token'),
        provider: provider.data,
        now: deps.clock(),
      }),
    )
  })

  return router
}
