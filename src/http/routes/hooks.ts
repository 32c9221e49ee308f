import express, { type Router } from 'express'
import { z } from 'zod'
import type { HookReading } from '../../hooks/hook-message.ts'
import { type HookName, type HookDeliveryDeps, acceptHookMessages } from '../../hooks/hook-delivery.ts'
import { kratosAuthorized, KratosCourierBody, readKratosCourier } from '../../hooks/kratos.ts'
import { verifyWebhook } from '../../hooks/standard-webhooks.ts'
import {
  readSupabaseEmailHook,
  readSupabaseSmsHook,
  SupabaseEmailHookPayload,
  SupabaseSmsHookPayload,
  type SupabaseEmailOptions,
} from '../../hooks/supabase.ts'
import { DomainError } from '../../identity/errors.ts'
import type { Logger } from '../../logging/logger.ts'
import { countRefusal } from '../../providers/webhooks.ts'
import { apiRegistry, apiRouter, route } from '../openapi/registry.ts'
import { HttpProblemError, problemOfDomain } from '../problem.ts'

const WebhookHeaders = z.object({
  'webhook-id': z.string().meta({ description: 'The delivery id Supabase signs (a UUID)' }),
  'webhook-timestamp': z.string().regex(/^\d+$/).meta({ description: 'Unix seconds; more than 5 minutes from our clock is refused' }),
  'webhook-signature': z.string().meta({ description: 'Space-separated `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<raw body>`' }),
})
const HookAnswer = z.object({}).meta({ description: 'Accepted: the messages are committed to the outbox (not yet delivered)' })
// Supabase Auth reads a hook's refusal only from a 200/202 `application/json` answer
// (supabase/auth internal/hooks/hookshttp/hookshttp.go, hookserrors.go); a 4xx reaches its user as a 500.
const SupabaseRefusal = z
  .object({
    code: z.string().meta({ description: 'The refusal, as the problem `code` other routes give' }),
    error: z.object({
      http_code: z.int().meta({ description: 'The status Supabase answers its user with (422, 429, 503, …)' }),
      message: z.string(),
    }),
  })
  .meta({ description: 'Refused, nothing written: Supabase answers its user with `error.http_code` and `error.message`' })
const SupabaseAnswer = z.union([HookAnswer, SupabaseRefusal])
// Besides the payload's own refusals, the courier's: its rules for a message and the caller's budgets.
const DELIBERATE = {
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
  429: ['rate_limited', 'destination_budget_exhausted'],
  // A purpose an older live worker cannot render yet (docs/upgrading.md "Format negotiation"): retryable.
  503: ['upgrade_in_progress'],
} as const
// The hook is not configured here: its route is not mounted and answers as an unknown one.
// too_many_requests: past the client's limit of failed authentications (a caller that authenticates is never refused for it).
const NOT_DELIBERATE = { 400: ['malformed'], 401: ['invalid_signature'], 404: ['not_found'], 429: ['too_many_requests'] } as const
const SUPABASE_DESCRIPTION =
  'A deliberate refusal (a budget, a number that cannot receive codes, an unavailable channel, an unknown kind, a kind an older worker still running cannot send yet) answers **200** with `{code, error: {http_code, message}}`, the only refusal Supabase shows its user (docs/hooks.md). A retry of the same message sends nothing twice.'

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
    description: `Verified before anything is read; each \`email_action_type\` becomes one message (two for a secure email change; a \`*_notification\` a security notice). ${SUPABASE_DESCRIPTION}`,
    headers: WebhookHeaders,
    body: SupabaseEmailHookPayload,
    success: { status: 200, description: 'Accepted, or refused as Supabase reads a refusal', body: SupabaseAnswer },
    problems: NOT_DELIBERATE,
  }),
  supabaseSms: hookApi.add({
    operationId: 'receiveSupabaseSendSms',
    method: 'post',
    path: '/hooks/supabase/send-sms',
    auth: 'none',
    summary: "Supabase Auth's Send SMS Hook (Standard Webhooks signature under SUPABASE_HOOK_SECRET)",
    description: SUPABASE_DESCRIPTION,
    headers: WebhookHeaders,
    body: SupabaseSmsHookPayload,
    success: { status: 200, description: 'Accepted, or refused as Supabase reads a refusal', body: SupabaseAnswer },
    problems: NOT_DELIBERATE,
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
    problems: { ...NOT_DELIBERATE, ...DELIBERATE, 429: [...DELIBERATE[429], ...NOT_DELIBERATE[429]] },
  }),
}

/** The paths of the hooks `configured` leaves out: not mounted, they answer every method as an unknown path (404). */
export function unmountedHookPaths(configured: Pick<HookRouteDeps, 'supabase' | 'kratos'> = {}): ReadonlySet<string> {
  return new Set([
    ...(configured.supabase ? [] : [api.supabaseEmail.path, api.supabaseSms.path]),
    ...(configured.kratos ? [] : [api.kratos.path]),
  ])
}

/** What the hook routes need: each hook's settings (unset = its routes are not mounted: 404) and the delivery use case. */
export type HookRouteDeps = HookDeliveryDeps & {
  logger: Logger
  /** SUPABASE_HOOK_SECRET's key, what an email carries and where its link goes, and the project's OTP lifetimes. */
  supabase?: { signingKey: Buffer; emailOtpExpirySeconds?: number; smsOtpExpirySeconds?: number } & SupabaseEmailOptions
  kratos?: { apiKey: string }
  /** Counts each outcome for /metrics (`sealpost_webhook_events_total{provider="supabase"|"kratos"}`). */
  count: (provider: string, outcome: string, reason?: string) => void
  /** Counts a refused credential against the client's per-client limit (429 past it). */
  failedAuthentication?: (req: express.Request) => Promise<unknown>
}

const TITLES: Record<string, string> = {
  invalid_signature: 'The hook delivery was refused.',
  malformed: 'The hook payload is not one this route reads.',
  unsupported_kind: 'This kind of message is not one Sealpost sends.',
  invalid_destination: 'The phone number is not one Sealpost can read (E.164).',
}

// Supabase's request limit is 1 MB and its payload carries the whole user object; Kratos' bodies are small.
const supabaseBody = express.raw({ type: () => true, limit: '1mb' })
const kratosBody = express.raw({ type: () => true, limit: '64kb' })
const bodyOf = (body: unknown): Buffer => (Buffer.isBuffer(body) ? body : Buffer.alloc(0))

function parsed(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8'))
  } catch {
    return undefined
  }
}

/** The refusal of one hook call, as a problem; Supabase's refusals also carry `error`, the member it reads. */
function refusalProblem(hook: HookName, problem: HttpProblemError): HttpProblemError {
  if (hook === 'kratos') return problem
  const extra = { ...problem.extra, error: { http_code: problem.status, message: problem.message } }
  return new HttpProblemError(problem.status, problem.code, problem.message, { headers: problem.headers, extra })
}

/**
 * `POST /hooks/…` (docs/hooks.md). Mounted before the app's JSON parser: a signature covers the raw
 * bytes. The caller is authenticated before the body is parsed or the database touched, so a
 * refused delivery writes nothing; the answer comes once the messages are committed (no send on
 * the request path: Supabase waits at most 5 s).
 */
export function hookRoutes(deps: HookRouteDeps): Router {
  const router = apiRouter()
  const supabase = deps.supabase
  const ttlSeconds = { 'supabase-email': supabase?.emailOtpExpirySeconds, 'supabase-sms': supabase?.smsOtpExpirySeconds }
  const delivery: HookDeliveryDeps = { ...deps, ttlSeconds: { ...deps.ttlSeconds, ...ttlSeconds } }
  const provider = (hook: HookName) => (hook === 'kratos' ? 'kratos' : 'supabase')
  const refused = (hook: HookName, problem: HttpProblemError, reason = problem.code): HttpProblemError => {
    countRefusal(deps, provider(hook), 'hook refused', reason, { hook })
    return refusalProblem(hook, problem)
  }
  const refuse = (hook: HookName, status: number, code: string, reason = code): never => {
    throw refused(hook, new HttpProblemError(status, code, TITLES[code] ?? code), reason)
  }
  /** Commits the reading's messages; the deliberate refusal, if any, for the route to answer (malformed is thrown). */
  const accept = async (hook: HookName, reading: HookReading): Promise<HttpProblemError | undefined> => {
    if ('refusal' in reading) {
      if (reading.refusal === 'malformed') return refuse(hook, 400, 'malformed')
      return refused(hook, new HttpProblemError(422, reading.refusal, TITLES[reading.refusal] ?? reading.refusal))
    }
    const accepted = await acceptHookMessages(delivery, hook, reading.messages)
    if ('refused' in accepted) return refused(hook, problemOfDomain(accepted.refused))
    deps.count(provider(hook), 'accepted')
    return undefined
  }
  // A refused credential is counted against the client's per-client limit first (429 past it).
  const unauthenticated = async (hook: HookName, req: express.Request, reason?: string): Promise<never> => {
    try {
      await deps.failedAuthentication?.(req)
    } catch (error) {
      if (error instanceof DomainError) throw refused(hook, problemOfDomain(error))
      throw error
    }
    return refuse(hook, 401, 'invalid_signature', reason)
  }

  if (supabase) {
    const verified = async (hook: HookName, req: express.Request): Promise<unknown> => {
      const raw = bodyOf(req.body)
      const headers = { id: req.get('webhook-id'), timestamp: req.get('webhook-timestamp'), signature: req.get('webhook-signature') }
      const verdict = verifyWebhook(supabase.signingKey, headers, raw, deps.clock())
      // One answer for every reason (missing, stale, wrong): the reason is logged and counted.
      if (!verdict.verified) return await unauthenticated(hook, req, verdict.refusal)
      return parsed(raw)
    }
    // Accepted `{}`, or the deliberate refusal as Supabase reads one: 200, `application/json`, `{error: {http_code, message}}`.
    const answer = (res: express.Response, refusal: HttpProblemError | undefined) => {
      if (!refusal) return void res.status(200).json({})
      res.set(refusal.headers)
      res.status(200).json({ code: refusal.code, error: { http_code: refusal.status, message: refusal.message } })
    }
    route(router, api.supabaseEmail, supabaseBody, async (req, res) => {
      answer(res, await accept('supabase-email', readSupabaseEmailHook(await verified('supabase-email', req), supabase)))
    })
    route(router, api.supabaseSms, supabaseBody, async (req, res) => {
      answer(res, await accept('supabase-sms', readSupabaseSmsHook(await verified('supabase-sms', req))))
    })
  }

  const kratos = deps.kratos
  if (kratos) {
    route(router, api.kratos, kratosBody, async (req, res) => {
      if (!kratosAuthorized(kratos.apiKey, req.get('authorization'))) await unauthenticated('kratos', req)
      // Kratos retries any non-2xx (courier/http_channel.go): a refusal keeps its status.
      const refusal = await accept('kratos', readKratosCourier(parsed(bodyOf(req.body))))
      if (refusal) throw refusal
      res.status(200).json({})
    })
  }
  return router
}
