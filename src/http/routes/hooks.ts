import express, { type Router } from 'express'
import { z } from 'zod'
import type { HookReading } from '../../hooks/hook-message.ts'
import { type HookName, type HookDeliveryDeps, acceptHookMessages } from '../../hooks/hook-delivery.ts'
import { kratosAuthorized, KratosCourierBody, readKratosCourier } from '../../hooks/kratos.ts'
import { verifyWebhook } from '../../hooks/standard-webhooks.ts'
import { readSupabaseEmailHook, readSupabaseSmsHook, SupabaseEmailHookPayload, SupabaseSmsHookPayload } from '../../hooks/supabase.ts'
import { DomainError } from '../../identity/errors.ts'
import type { Logger } from '../../logging/logger.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError, problemOfDomain } from '../problem.ts'

const WebhookHeaders = z.object({
  'webhook-id': z.string().meta({ description: 'The delivery id Supabase signs (a UUID)' }),
  'webhook-timestamp': z.string().regex(/^\d+$/).meta({ description: 'Unix seconds; more than 5 minutes from our clock is refused' }),
  'webhook-signature': z.string().meta({ description: 'Space-separated `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<raw body>`' }),
})
const HookAnswer = z.object({}).meta({ description: 'Accepted: the messages are committed to the outbox (not yet delivered)' })
// Besides the payload's own refusals, the courier's: its rules for a message and the caller's budgets.
const REFUSED = {
  400: ['malformed'],
  401: ['invalid_signature'],
  422: [
    'unsupported_kind',
    'invalid_destination',
    'unsupported_phone_number',
    'invalid_secret',
    'invalid_link',
    'link_origin_not_allowed',
    'invalid_expiry',
    'channel_unavailable',
  ],
  // too_many_requests: past the client's limit of failed authentications (a real delivery is never refused for it).
  429: ['rate_limited', 'destination_budget_exhausted', 'too_many_requests'],
  // The hook is not configured here: its route is not mounted and answers as an unknown one.
  404: ['not_found'],
} as const

/** The API document's description of each hook route below, in the same order. */
export const hookApi = apiRegistry(
  'Identity system hooks',
  'Supabase Auth Send Email / Send SMS hooks and the Ory Kratos HTTP courier: their messages delivered through the outbox (docs/hooks.md). A hook that is not configured answers 404.',
)
const api = {
  supabaseEmail: hookApi.add({
    operationId: 'receiveSupabaseSendEmail',
    method: 'post',
    path: '/hooks/supabase/send-email',
    auth: 'none',
    summary: "Supabase Auth's Send Email Hook (Standard Webhooks signature under SUPABASE_HOOK_SECRET)",
    description:
      'Verified before anything is read; each `email_action_type` that carries a code or link becomes one message (two for a secure email change). A retry of the same message sends nothing twice.',
    headers: WebhookHeaders,
    body: SupabaseEmailHookPayload,
    success: { status: 200, description: 'Accepted', body: HookAnswer },
    problems: REFUSED,
  }),
  supabaseSms: hookApi.add({
    operationId: 'receiveSupabaseSendSms',
    method: 'post',
    path: '/hooks/supabase/send-sms',
    auth: 'none',
    summary: "Supabase Auth's Send SMS Hook (Standard Webhooks signature under SUPABASE_HOOK_SECRET)",
    headers: WebhookHeaders,
    body: SupabaseSmsHookPayload,
    success: { status: 200, description: 'Accepted', body: HookAnswer },
    problems: REFUSED,
  }),
  kratos: hookApi.add({
    operationId: 'receiveKratosCourierMessage',
    method: 'post',
    path: '/hooks/kratos/courier',
    auth: 'none',
    summary: "Ory Kratos' HTTP courier (Authorization: Bearer KRATOS_COURIER_API_KEY, or basic auth with it as the password)",
    headers: z.object({
      Authorization: z.string().meta({ description: '`Bearer <KRATOS_COURIER_API_KEY>` or `Basic <user:KRATOS_COURIER_API_KEY>`' }),
    }),
    body: KratosCourierBody,
    success: { status: 200, description: 'Accepted', body: HookAnswer },
    problems: REFUSED,
  }),
}

/** The paths of the hooks `configured` leaves out: not mounted, they answer every method as an unknown path (404). */
export function unmountedHookPaths(configured: Pick<HookRouteDeps, 'supabase' | 'kratos'> = {}): ReadonlySet<string> {
  return new Set([
    ...(configured.supabase ? [] : [api.supabaseEmail.path, api.supabaseSms.path]),
    ...(configured.kratos ? [] : [api.kratos.path]),
  ])
}

/** What the hook routes need: each hook's credential (unset = its routes are not mounted: 404) and the delivery use case. */
export type HookRouteDeps = HookDeliveryDeps & {
  logger: Logger
  supabase?: { signingKey: Buffer }
  kratos?: { apiKey: string }
  /** Counts each outcome for /metrics (`sealpost_webhook_events_total{provider="supabase"|"kratos"}`). */
  count: (provider: string, outcome: string, reason?: string) => void
  /** Counts a refused credential against the client's per-client limit (429 past it). */
  failedAuthentication?: (req: express.Request) => Promise<unknown>
}

// Supabase reads `{error: {http_code, message}}` from a hook's answer: every refusal carries it beside the problem's members.
function forSupabase(problem: HttpProblemError): HttpProblemError {
  const extra = { ...problem.extra, error: { http_code: problem.status, message: problem.message } }
  return new HttpProblemError(problem.status, problem.code, problem.message, { headers: problem.headers, extra })
}

const TITLES: Record<string, string> = {
  invalid_signature: 'The hook delivery was refused.',
  malformed: 'The hook payload is not one this route reads.',
  unsupported_kind: 'This kind of message carries no code or link; it is not sent.',
}

const rawBody = express.raw({ type: () => true, limit: '64kb' })
const bodyOf = (body: unknown): Buffer => (Buffer.isBuffer(body) ? body : Buffer.alloc(0))

function parsed(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8'))
  } catch {
    return undefined
  }
}

/**
 * `POST /hooks/…` (docs/hooks.md). Mounted before the app's JSON parser: a signature covers the raw
 * bytes. The caller is authenticated before the body is parsed or the database touched, so a
 * refused delivery writes nothing; the answer comes once the messages are committed (no send on
 * the request path: Supabase waits at most 5 s).
 */
export function hookRoutes(deps: HookRouteDeps): Router {
  const router = apiRouter()
  const provider = (hook: HookName) => (hook === 'kratos' ? 'kratos' : 'supabase')
  const refuse = (hook: HookName, status: number, code: string, reason = code): never => {
    deps.count(provider(hook), 'refused', reason)
    deps.logger.warn('hook refused', { hook, reason })
    throw forSupabase(new HttpProblemError(status, code, TITLES[code] ?? code))
  }
  const refuseDomain = (hook: HookName, refused: DomainError): never => {
    deps.count(provider(hook), 'refused', refused.code)
    deps.logger.warn('hook refused', { hook, reason: refused.code })
    throw forSupabase(problemOfDomain(refused))
  }
  const accept = async (hook: HookName, reading: HookReading): Promise<void> => {
    if ('refusal' in reading) return refuse(hook, reading.refusal === 'malformed' ? 400 : 422, reading.refusal)
    const accepted = await acceptHookMessages(deps, hook, reading.messages)
    if ('refused' in accepted) return refuseDomain(hook, accepted.refused)
    deps.count(provider(hook), 'accepted')
  }

  // A refused credential is counted against the client's per-client limit first (429 past it).
  const unauthenticated = async (hook: HookName, req: express.Request, reason?: string): Promise<never> => {
    try {
      await deps.failedAuthentication?.(req)
    } catch (error) {
      if (error instanceof DomainError) return refuseDomain(hook, error)
      throw error
    }
    return refuse(hook, 401, 'invalid_signature', reason)
  }

  const supabase = deps.supabase
  if (supabase) {
    const verified = async (hook: HookName, req: express.Request): Promise<unknown> => {
      const raw = bodyOf(req.body)
      const headers = { id: req.get('webhook-id'), timestamp: req.get('webhook-timestamp'), signature: req.get('webhook-signature') }
      const verdict = verifyWebhook(supabase.signingKey, headers, raw, deps.clock())
      // One answer for every reason (missing, stale, wrong): the reason is logged and counted.
      if (!verdict.verified) return await unauthenticated(hook, req, verdict.refusal)
      return parsed(raw)
    }
    route(router, api.supabaseEmail, rawBody, async (req, res) => {
      await accept('supabase-email', readSupabaseEmailHook(await verified('supabase-email', req)))
      res.status(200).json({})
    })
    route(router, api.supabaseSms, rawBody, async (req, res) => {
      await accept('supabase-sms', readSupabaseSmsHook(await verified('supabase-sms', req)))
      res.status(200).json({})
    })
  }

  const kratos = deps.kratos
  if (kratos) {
    route(router, api.kratos, rawBody, async (req, res) => {
      if (!kratosAuthorized(kratos.apiKey, req.get('authorization'))) await unauthenticated('kratos', req)
      await accept('kratos', readKratosCourier(parsed(bodyOf(req.body))))
      res.status(200).json({})
    })
  }
  return router
}
