import express from 'express'
import helmet from 'helmet'
import type { Knex } from 'knex'
import type { ChallengeDeps } from '../identity/challenges.ts'
import type { BreachedPasswordCheck } from '../identity/password-policy.ts'
import type { Logger } from '../logging/logger.ts'
import { limitPerClient } from './client-limit.ts'
import { HttpProblemError, problemHandler, sendProblem } from './problem.ts'
import { requestId } from './request-id.ts'
import { healthRoutes } from './routes/health.ts'
import { identityRoutes } from './routes/identity.ts'
import { accountRoutes } from './routes/account.ts'
import { organizationRoutes } from './routes/organizations.ts'
import { outboxControlRoutes } from './routes/outbox-controls.ts'
import { platformAdminRoutes } from './routes/platform-admin.ts'
import { decideMetricsAccess, type MetricsAccess } from '../metrics/access.ts'
import { createWebMetrics } from '../metrics/web-metrics.ts'
import type { InvitationDeps } from '../organization/invitations.ts'
import { API_REGISTRIES, openApiDocument } from './openapi.ts'
import { documentedMethodsOnly } from './method-guard.ts'
import { route } from './openapi/registry.ts'
import { apiDocsPage, developmentPages, operatorConsole, type DevelopmentPages } from './pages.ts'
import { serviceOperations } from './routes/service.ts'
import type { BoundWebhook } from '../providers/webhooks.ts'
import { bindWebhooks } from '../providers/wiring.ts'
import { fallBackToNextPhoneChannel } from '../identity/phone-fallback.ts'
import { webhookRoutes } from './routes/webhooks.ts'
import { hookRoutes, unmountedHookPaths, type HookRouteDeps } from './routes/hooks.ts'
import { sendCapRoutes } from './routes/send-caps.ts'
import { suppressionRoutes } from './routes/suppressions.ts'
import { auditRecordRoutes } from './routes/audit-records.ts'
import { peopleRoutes } from './routes/people.ts'
import { apiKeyRoutes } from './routes/api-keys.ts'
import { courierRoutes } from './routes/courier.ts'
import { webhookEndpointRoutes } from './routes/webhook-endpoints.ts'
import { resolveWithDns, type AddressPolicy } from '../platform/webhook-address-guard.ts'
import { negotiatedLocale } from './locale.ts'
import type { Purpose } from '../outbox/constants.ts'
import type { Locale } from '../delivery/locales.ts'

export type WebDeps = {
  db: Knex
  challenges: ChallengeDeps
  invitations: InvitationDeps
  logger: Logger
  clientLimitPerMinute: number
  metrics: MetricsAccess
  trustProxy?: boolean | number | string[]
  apiDocs?: boolean
  /** `npm start` only: the index at `/` and the explanation at `/join` (unset: both 404). */
  developmentPages?: Omit<DevelopmentPages, 'apiDocs'>
  /** Every provider's webhook routes with their settings (src/providers/wiring.ts `bindWebhooks`); unset, each refuses everything. */
  webhooks?: readonly BoundWebhook[]
  /** Identity systems' hooks (docs/hooks.md); each one unset is not mounted (404). */
  hooks?: Pick<HookRouteDeps, 'supabase' | 'kratos' | 'hookSettings'>
  /** The locale of messages whose request's Accept-Language names none we ship. */
  defaultLocale?: Locale
  /** Whether every live worker renders a purpose (format negotiation); the courier and the hooks refuse one it does not (503). */
  renderedPurpose?: (purpose: Purpose) => boolean
  /** Cookies carry `Secure` (staging and production: the client reaches us over HTTPS). */
  secureCookies?: boolean
  /** Which webhook endpoint URLs pass the SSRF guard (default: production rules, nothing allow-listed, DNS). */
  webhookAddresses?: AddressPolicy
  /** The breached-password lookup new passwords go through (BREACHED_PASSWORD_API_URL); unset = none. */
  breachedPasswords?: BreachedPasswordCheck
}

// Every lookup's outcome is counted: `unavailable` (accepted unchecked) is the one to alert on.
function counted(check: BreachedPasswordCheck | undefined, count: (outcome: string) => void): BreachedPasswordCheck | undefined {
  if (!check) return undefined
  return async (password) => {
    const outcome = await check(password)
    count(outcome)
    return outcome
  }
}

/**
 * The route a request matched, as declared (`/organizations/:organizationId/invitations`), never
 * the URL a caller typed; `unmatched` when no route took it (a 404, a static page). Logs and
 * metrics label requests with it, so no caller can mint a new label value.
 */
function routeTemplate(req: express.Request): string {
  const path: unknown = req.route?.path
  return typeof path === 'string' ? path : 'unmatched'
}

type WebMetrics = ReturnType<typeof createWebMetrics>
/** Counts a refused API key or hook credential against the client's per-client limit. */
type FailedAuthentication = ReturnType<typeof limitPerClient>

/** What every request goes through first: exact paths, the client's address, an id, security headers, no caching, a log line and a metric. */
function useFrame(app: express.Express, deps: WebDeps, metrics: WebMetrics): void {
  app.disable('x-powered-by')
  // Paths match exactly as documented: no case-folded or trailing-slash aliases (src/http/openapi/registry.ts apiRouter).
  app.set('case sensitive routing', true)
  app.set('strict routing', true)
  // Who the client is (req.ip) behind a router: TRUST_PROXY, off unless configured.
  app.set('trust proxy', deps.trustProxy ?? false)
  app.use(requestId())
  // JSON API: no framing, no sniffing, HSTS, a CSP that allows nothing beyond this origin.
  app.use(helmet())
  // Sessions, elevation and invitation tokens travel in bodies: no answer is ever stored by a cache.
  app.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store')
    next()
  })
  app.use((req, res, next) => {
    const started = performance.now()
    res.on('finish', () => {
      const seconds = (performance.now() - started) / 1000
      const route = routeTemplate(req)
      // 'finish' fires outside the request's async context: the id is passed along by hand.
      deps.logger.info('request', {
        requestId: res.locals.requestId,
        method: req.method,
        route,
        status: res.statusCode,
        durationMs: Math.round(seconds * 1000),
      })
      metrics.request(req.method, route, res.statusCode, seconds)
    })
    next()
  })
  app.use(documentedMethodsOnly(API_REGISTRIES, unmountedHookPaths(deps.hooks)))
}

/** Providers' webhooks and identity systems' hooks, before the JSON parser: they read their bodies as their senders send them. */
function useInbound(app: express.Express, deps: WebDeps, metrics: WebMetrics, failedAuthentication: FailedAuthentication): void {
  app.use(
    webhookRoutes(
      {
        db: deps.db,
        clock: deps.challenges.clock,
        logger: deps.logger,
        count: metrics.webhook,
        codeHashKeys: deps.challenges.codeHashKeys ?? [deps.challenges.codeHashKey],
        onChannelUnreachable: async (messageId) => {
          await fallBackToNextPhoneChannel(deps.db, deps.challenges, messageId)
        },
      },
      deps.webhooks ?? bindWebhooks(undefined),
    ),
  )
  app.use(
    hookRoutes({
      ...deps.challenges,
      db: deps.db,
      defaultLocale: deps.defaultLocale ?? 'en',
      logger: deps.logger,
      count: metrics.webhook,
      failedAuthentication,
      renderedPurpose: deps.renderedPurpose,
      ...deps.hooks,
    }),
  )
}

/** The people's routes: the identity flows, the account, organizations. */
function usePeopleRoutes(app: express.Express, deps: WebDeps, metrics: WebMetrics): void {
  const secureCookies = deps.secureCookies ?? true
  const breachedPasswords = counted(deps.breachedPasswords, metrics.breachedPasswordCheck)
  const { db, challenges } = deps
  app.use(identityRoutes({ db, challenges, clientLimitPerMinute: deps.clientLimitPerMinute, secureCookies, breachedPasswords }))
  app.use(accountRoutes({ db, challenges, breachedPasswords, secureCookies }))
  app.use(organizationRoutes({ db, invitations: deps.invitations }))
}

/** The staff's routes (docs/operations.md): the outbox, its controls, caps, suppressions, audit, endpoints, people and keys. */
function useStaffRoutes(app: express.Express, deps: WebDeps): void {
  const { db, challenges } = deps
  const clock = challenges.clock
  // One set of reissue dependencies for the single reissue and the redrive: both seal in the negotiated envelope version.
  const reissue = {
    boss: challenges.boss,
    outboxKey: challenges.outboxKey,
    codeHashKey: challenges.codeHashKey,
    clock,
    logger: deps.logger,
    envelopeVersion: challenges.envelopeVersion,
  }
  app.use(platformAdminRoutes({ db, reissue }))
  app.use(outboxControlRoutes({ db, reissue, ...(challenges.codeHashKeys ? { codeHashKeys: challenges.codeHashKeys } : {}) }))
  app.use(sendCapRoutes({ db, clock }))
  app.use(suppressionRoutes({ db, clock }))
  app.use(auditRecordRoutes({ db, clock }))
  const addresses = deps.webhookAddresses ?? { production: true, allowedHosts: [], resolve: resolveWithDns }
  app.use(webhookEndpointRoutes({ db, outboxKey: challenges.outboxKey, clock, addresses }))
  app.use(peopleRoutes({ db, people: { codeHashKey: challenges.codeHashKey, codeHashKeys: challenges.codeHashKeys, clock } }))
  app.use(apiKeyRoutes({ db, clock }))
}

/** What is no API route: /metrics, the static pages, and the answers to everything else (404, a problem for every error). */
function usePages(app: express.Express, deps: WebDeps, metrics: WebMetrics): void {
  app.get('/metrics', async (req, res) => {
    const decision = decideMetricsAccess(deps.metrics, req.get('authorization'))
    if (decision === 'not_served') throw new HttpProblemError(404, 'not_found', 'No such route.')
    if (decision === 'unauthenticated')
      throw new HttpProblemError(401, 'unauthenticated', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.', {
        headers: { 'WWW-Authenticate': 'Bearer' },
      })
    res.type(metrics.registry.contentType).send(await metrics.render())
  })
  // Static pages (middleware, not API routes): the operator console always, the API reference where enabled.
  app.use('/platform-admin', operatorConsole())
  if (deps.apiDocs) app.use('/docs', apiDocsPage())
  if (deps.developmentPages) app.use(developmentPages({ ...deps.developmentPages, apiDocs: Boolean(deps.apiDocs) }))
  app.use((_req, res) => sendProblem(res, new HttpProblemError(404, 'not_found', 'No such route.')))
  app.use(problemHandler(deps.logger))
}

/** The Express app: thin routes over use cases, every error mapped by problemHandler. */
export function createApp(deps: WebDeps): express.Express {
  const app = express()
  const metrics = createWebMetrics(deps.db, deps.challenges.clock)
  useFrame(app, deps, metrics)
  // A refused API key or hook credential spends the client's per-client limit, as a public route's request does.
  const failedAuthentication = limitPerClient(
    deps.db,
    deps.challenges.codeHashKeys ?? [deps.challenges.codeHashKey],
    deps.clientLimitPerMinute,
    deps.challenges.clock,
    deps.logger,
  )
  useInbound(app, deps, metrics, failedAuthentication)
  app.use(express.json({ limit: '16kb', strict: true }))
  app.use(negotiatedLocale(deps.defaultLocale ?? 'en'))
  app.use(healthRoutes(deps.db))
  const openapi = openApiDocument()
  route(app, serviceOperations.openapi, (_req, res) => {
    res.json(openapi)
  })
  usePeopleRoutes(app, deps, metrics)
  useStaffRoutes(app, deps)
  app.use(
    courierRoutes({ ...deps.challenges, db: deps.db, logger: deps.logger, failedAuthentication, renderedPurpose: deps.renderedPurpose }),
  )
  usePages(app, deps, metrics)
  return app
}
